#include "saturate/core/oom.h"

#include "saturate/core/torch_error.h"

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include <c10/util/Exception.h>

namespace saturate {
namespace {

// What an allocator says when it runs out, wherever the text ends up. LibTorch does not keep the
// exception's type everywhere: the TorchScript interpreter rethrows every failure of an operation
// (c10::OutOfMemoryError included) as a plain std::runtime_error or torch::jit::JITException whose
// message is "The following operation failed in the TorchScript interpreter.", the TorchScript
// traceback, then "RuntimeError: " and the original message, so only the text tells. The autograd
// engine keeps the exception it caught (std::exception_ptr), but the backward of a scripted model
// runs in the interpreter again. c10::Error chains append context lines to the message.
const char* const kMarks[] = {
    "CPU budget exceeded: tried to allocate",  // our CPU budget allocator (cpu_budget_allocator.cpp)
    "out of memory",            // CUDA caching allocator ("CUDA out of memory. Tried to allocate"),
                                // cudaErrorMemoryAllocation ("CUDA error: out of memory"), HIP, MPS, XPU
    "can't allocate memory",    // LibTorch's default CPU allocator
    "std::bad_alloc",
    "cudaErrorMemoryAllocation",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "CUDNN_STATUS_NOT_SUPPORTED",  // cuDNN's answer when a batch is too large for its kernels'
                                   // workspace (Lightning counts it as an OOM as well)
    "CUSOLVER_STATUS_ALLOC_FAILED",
    "CUFFT_ALLOC_FAILED",
};

bool message_says_out_of_memory(const std::exception& e) {
  // c10::Error: the message and its context lines, without the C++ backtrace.
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  const std::string text = without_script_traceback(c10_error ? c10_error->what_without_backtrace() : e.what());
  for (const char* mark : kMarks)
    if (text.find(mark) != std::string::npos) return true;
  return false;
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  if (message_says_out_of_memory(e)) return true;
  // an exception thrown with std::throw_with_nested: the cause decides.
  if (const auto* nested = dynamic_cast<const std::nested_exception*>(&e); nested && nested->nested_ptr()) {
    try {
      nested->rethrow_nested();
    } catch (const std::exception& inner) {
      return is_out_of_memory(inner);
    } catch (...) {
    }
  }
  return false;
}

}  // namespace saturate

// Implements: telling an out-of-memory failure from any other error, on CPU and CUDA.
// c10::OutOfMemoryError covers the CUDA caching allocator and our CPU budget; cuBLAS, cuDNN and
// the default CPU allocator report running out of memory as plain errors, told by message.
#pragma once
#include <exception>

namespace saturate {
bool is_out_of_memory(const std::exception& e);
}

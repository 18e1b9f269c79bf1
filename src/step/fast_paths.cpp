#include "saturate/step/fast_paths.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "saturate/core/errors.h"

namespace saturate {

const std::vector<std::string>& fast_path_names() {
  static const std::vector<std::string> names = {"cudnn_benchmark", "tf32", "channels_last", "fused_optimizer",
                                                  "cuda_graphs", "threads=N", "compress_bf16"};
  return names;
}

std::vector<std::string> FastPaths::names() const {
  std::vector<std::string> out;
  if (cudnn_benchmark) out.push_back("cudnn_benchmark");
  if (tf32) out.push_back("tf32");
  if (channels_last) out.push_back("channels_last");
  if (fused_optimizer) out.push_back("fused_optimizer");
  if (cuda_graphs) out.push_back("cuda_graphs");
  if (threads > 0) out.push_back(fmt::format("threads={}", threads));
  if (compress_bf16) out.push_back("compress_bf16");
  return out;
}

std::string FastPaths::to_string() const {
  const auto n = names();
  return n.empty() ? "none" : fmt::format("{}", fmt::join(n, ","));
}

FastPaths parse_fast_paths(const std::string& text) {
  FastPaths p;
  if (text == "none" || text.empty()) return p;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == "cudnn_benchmark") {
      p.cudnn_benchmark = true;
    } else if (item == "tf32") {
      p.tf32 = true;
    } else if (item == "channels_last") {
      p.channels_last = true;
    } else if (item == "fused_optimizer") {
      p.fused_optimizer = true;
    } else if (item == "cuda_graphs") {
      p.cuda_graphs = true;
    } else if (item == "compress_bf16") {
      p.compress_bf16 = true;
    } else if (item.rfind("threads=", 0) == 0) {
      int n = 0;
      size_t used = 0;
      try {
        n = std::stoi(item.substr(8), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size() - 8 || n < 1 || n > 4096)
        throw UsageError("fast_paths", fmt::format("{}: give a thread count between 1 and 4096, e.g. threads=4", item));
      p.threads = n;
    } else {
      throw UsageError("fast_paths", fmt::format("'{}' in '{}' is not a fast path; use none or a comma-separated list of "
                                                 "{}",
                                                 item, text, fmt::join(fast_path_names(), ", ")));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return p;
}

void set_process_switches(const FastPaths& paths) {
  auto& ctx = at::globalContext();
  if (paths.cudnn_benchmark) ctx.setBenchmarkCuDNN(true);
  if (paths.tf32) {
    ctx.setAllowTF32CuBLAS(true);
    ctx.setAllowTF32CuDNN(true);
  }
  if (paths.threads > 0) at::set_num_threads(paths.threads);
}

ProcessSwitches::ProcessSwitches(const FastPaths& paths) {
  auto& ctx = at::globalContext();
  cudnn_benchmark_ = ctx.benchmarkCuDNN();
  tf32_cublas_ = ctx.allowTF32CuBLAS();
  tf32_cudnn_ = ctx.allowTF32CuDNN();
  threads_ = at::get_num_threads();
  set_process_switches(paths);
}

ProcessSwitches::~ProcessSwitches() {
  auto& ctx = at::globalContext();
  ctx.setBenchmarkCuDNN(cudnn_benchmark_);
  ctx.setAllowTF32CuBLAS(tf32_cublas_);
  ctx.setAllowTF32CuDNN(tf32_cudnn_);
  if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
}

void set_memory_format(const std::vector<torch::Tensor>& tensors, torch::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor t : tensors)
    if (t.defined() && t.dim() == 4 && !t.is_contiguous(format)) t.set_data(t.contiguous(format));
}

bool has_4d(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors)
    if (t.defined() && t.dim() == 4) return true;
  return false;
}

}  // namespace saturate

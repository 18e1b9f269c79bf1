// Implements: what every report opens with: what was measured (model, input, optimizer, budget),
// where (device and GPU name, host, CPU, world size) and by what (saturate's version and git
// commit, build type, LibTorch and CUDA versions), so that two reports can be compared.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace saturate {

struct RunContext {
  std::string command;      ///< "search", "memory", "train", ... ("" when not a command)
  std::string device;       ///< "cpu" or "cuda:0"
  std::string device_info;  ///< one line: threads / GPU name and memory
  /// On the CPU: how the thread count was set ("given", "OMP_NUM_THREADS=1", "auto: ...").
  std::string threads_reason;
  std::string gpu_name;     ///< "NVIDIA H200"; "" on the CPU
  std::string model_name;
  int64_t model_parameters = 0;
  std::string input;        ///< "1x28x28" or "tokens 128 (vocab 8192)"
  std::string optimizer;
  int64_t budget_bytes = 0;
  int world_size = 1;       ///< processes (ranks) in the run
  // the build (core/build_info.h)
  std::string saturate_version;
  std::string git_commit;
  std::string build_type;
  std::string compiler;
  std::string sanitizers;
  std::string libtorch_version;
  std::string cuda_version;  ///< the CUDA runtime LibTorch was built with; "" without CUDA
  // the host
  std::string host;
  std::string cpu_name;
  int cpu_cores = 0;
};

/// A context with the build's and this host's fields filled in (the rest for the caller).
RunContext run_context_here();
/// The context's keys of a run JSON (model, device, budget, versions, host, ...).
nlohmann::json context_json(const RunContext& c);
/// One line naming the build and host: "saturate 0.1.0 (abc123, Release), LibTorch 2.11.0, CUDA 13.0 on host (CPU, 2 cores)".
std::string provenance_line(const RunContext& c);

}  // namespace saturate

// Implements: NVML (the library behind nvidia-smi) loaded at run time with dlopen, so that
// saturate builds without its header and runs on machines without a driver. Only the handful
// of calls the sampler needs are declared, by hand, as nvtop does. No LibTorch here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace saturate {

/// One reading of one GPU. A field NVML could not give is NaN (the sampler leaves it out).
struct NvmlReading {
  double gpu_util_percent;       ///< time a kernel was running over the driver's last period
  double mem_util_percent;       ///< time device memory was being read or written
  double mem_used_bytes;
  double mem_total_bytes;
  double power_w;
  double sm_clock_mhz;
  double temperature_c;
  double process_gpu_mem_bytes;  ///< summed over the pids asked about; NaN when none is listed
};

class Nvml {
 public:
  /// The library dlopen() loads: `path` when not empty, else $SATURATE_NVML_LIBRARY when set
  /// (tests point it at a fake), else "libnvidia-ml.so.1".
  static std::string library_path(const std::string& path = "");
  /// Loads the library, resolves the symbols and calls nvmlInit_v2. Returns nullptr and says
  /// why in `*why` when NVML is unavailable (no library, a missing symbol, init failed):
  /// that is an expected outcome on a machine without a GPU, not an error.
  static std::shared_ptr<Nvml> load(const std::string& path, std::string* why);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& path() const { return path_; }
  int device_count() const;
  std::string device_name(int index) const;
  /// Reads GPU `index`; `pids`: the processes whose GPU memory is summed.
  NvmlReading read(int index, const std::vector<int>& pids) const;

  struct Api;  // the resolved function pointers (nvml.cpp)

 private:
  Nvml() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string path_;
};

}  // namespace saturate

#include "saturate/monitor/nvml.h"
#include "monitor/readings.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace saturate {
namespace nvml_abi {  // named, not anonymous: Nvml::Api holds these types

// The few NVML declarations saturate needs, written from NVML's documented ABI (nvml.h is not
// installed here). Return codes: 0 success, 7 insufficient size.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlProcessInfo_t {  // the layout _v2 and _v3 share
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr int kClockSm = 1;         // NVML_CLOCK_SM
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr unsigned long long kValueNotAvailable = ~0ULL;

}  // namespace nvml_abi

struct Nvml::Api {
  nvml_abi::nvmlReturn_t (*init)() = nullptr;
  nvml_abi::nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvml_abi::nvmlReturn_t) = nullptr;
  nvml_abi::nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvml_abi::nvmlReturn_t (*handle_by_index)(unsigned int, nvml_abi::nvmlDevice_t*) = nullptr;
  nvml_abi::nvmlReturn_t (*name)(nvml_abi::nvmlDevice_t, char*, unsigned int) = nullptr;
  nvml_abi::nvmlReturn_t (*utilization)(nvml_abi::nvmlDevice_t, nvml_abi::nvmlUtilization_t*) = nullptr;
  nvml_abi::nvmlReturn_t (*memory)(nvml_abi::nvmlDevice_t, nvml_abi::nvmlMemory_t*) = nullptr;
  nvml_abi::nvmlReturn_t (*power)(nvml_abi::nvmlDevice_t, unsigned int*) = nullptr;
  nvml_abi::nvmlReturn_t (*clock)(nvml_abi::nvmlDevice_t, int, unsigned int*) = nullptr;
  nvml_abi::nvmlReturn_t (*temperature)(nvml_abi::nvmlDevice_t, int, unsigned int*) = nullptr;
  nvml_abi::nvmlReturn_t (*processes)(nvml_abi::nvmlDevice_t, unsigned int*, nvml_abi::nvmlProcessInfo_t*) = nullptr;
};

std::string Nvml::library_path(const std::string& path) {
  if (!path.empty()) return path;
  if (const char* env = std::getenv("SATURATE_NVML_LIBRARY"); env && *env) return env;
  return "libnvidia-ml.so.1";
}

std::shared_ptr<Nvml> Nvml::load(const std::string& path, std::string* why) {
  const std::string lib = library_path(path);
  auto fail = [&](const std::string& reason) -> std::shared_ptr<Nvml> {
    if (why) *why = reason;
    return nullptr;
  };
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return fail("NVML unavailable: cannot load " + lib + (err ? std::string(" (") + err + ")" : ""));
  }
  std::shared_ptr<Nvml> nvml(new Nvml);
  nvml->handle_ = handle;
  nvml->path_ = lib;
  nvml->api_ = std::make_unique<Api>();
  Api& a = *nvml->api_;
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (!fn && missing.empty()) missing = name;
  };
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.error_string, "nvmlErrorString");
  sym(a.device_count, "nvmlDeviceGetCount_v2");
  sym(a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.name, "nvmlDeviceGetName");
  sym(a.utilization, "nvmlDeviceGetUtilizationRates");
  sym(a.memory, "nvmlDeviceGetMemoryInfo");
  sym(a.power, "nvmlDeviceGetPowerUsage");
  sym(a.clock, "nvmlDeviceGetClockInfo");
  sym(a.temperature, "nvmlDeviceGetTemperature");
  sym(a.processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!missing.empty()) {
    nvml->api_->shutdown = nullptr;  // never initialised: the destructor only closes
    return fail("NVML unavailable: " + lib + " has no symbol " + missing);
  }
  if (const nvml_abi::nvmlReturn_t rc = a.init(); rc != nvml_abi::kSuccess) {
    const std::string msg = a.error_string ? a.error_string(rc) : "error";
    a.shutdown = nullptr;
    return fail("NVML unavailable: nvmlInit_v2 failed: " + msg + " (code " + std::to_string(rc) + ")");
  }
  return nvml;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (handle_) dlclose(handle_);
}

int Nvml::device_count() const {
  unsigned int n = 0;
  return api_->device_count(&n) == nvml_abi::kSuccess ? static_cast<int>(n) : 0;
}

std::string Nvml::device_name(int index) const {
  nvml_abi::nvmlDevice_t dev = nullptr;
  if (api_->handle_by_index(static_cast<unsigned int>(index), &dev) != nvml_abi::kSuccess) return "";
  char name[96] = {};
  if (api_->name(dev, name, sizeof(name)) != nvml_abi::kSuccess) return "";
  return name;
}

NvmlReading Nvml::read(int index, const std::vector<int>& pids) const {
  NvmlReading r{monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading, monitor_detail::kNoReading};
  nvml_abi::nvmlDevice_t dev = nullptr;
  if (api_->handle_by_index(static_cast<unsigned int>(index), &dev) != nvml_abi::kSuccess) return r;
  if (nvml_abi::nvmlUtilization_t u{}; api_->utilization(dev, &u) == nvml_abi::kSuccess) {
    r.gpu_util_percent = u.gpu;
    r.mem_util_percent = u.memory;
  }
  if (nvml_abi::nvmlMemory_t m{}; api_->memory(dev, &m) == nvml_abi::kSuccess) {
    r.mem_used_bytes = static_cast<double>(m.used);
    r.mem_total_bytes = static_cast<double>(m.total);
  }
  if (unsigned int mw = 0; api_->power(dev, &mw) == nvml_abi::kSuccess) r.power_w = mw / 1000.0;
  if (unsigned int mhz = 0; api_->clock(dev, nvml_abi::kClockSm, &mhz) == nvml_abi::kSuccess) r.sm_clock_mhz = mhz;
  if (unsigned int c = 0; api_->temperature(dev, nvml_abi::kTemperatureGpu, &c) == nvml_abi::kSuccess) r.temperature_c = c;
  if (!pids.empty()) {
    std::vector<nvml_abi::nvmlProcessInfo_t> infos(32);
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned int count = static_cast<unsigned int>(infos.size());
      const nvml_abi::nvmlReturn_t rc = api_->processes(dev, &count, infos.data());
      if (rc == nvml_abi::kInsufficientSize) {
        infos.resize(count + 16);
        continue;
      }
      if (rc != nvml_abi::kSuccess) break;
      double sum = 0;
      bool found = false;
      for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
        for (int pid : pids) {
          if (static_cast<int>(infos[i].pid) == pid && infos[i].usedGpuMemory != nvml_abi::kValueNotAvailable) {
            sum += static_cast<double>(infos[i].usedGpuMemory);
            found = true;
          }
        }
      }
      // a process with no CUDA context is not listed: it uses no GPU memory.
      r.process_gpu_mem_bytes = found ? sum : 0.0;
      break;
    }
  }
  return r;
}

}  // namespace saturate

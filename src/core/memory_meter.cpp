#include "saturate/core/memory_meter.h"

#include <unistd.h>

#include "core/cuda_memory_meter.h"
#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/cpu_math.h"
#include "saturate/core/errors.h"

namespace saturate {
namespace {

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return static_cast<int64_t>(pages) * page_size;
}

class CpuMemoryMeter final : public MemoryMeter {
 public:
  MemoryStats stats() const override {
    const CpuMemoryCounters c = cpu_memory_counters();
    // no cache on CPU: reserved is what is allocated.
    return {c.allocated_bytes, c.allocated_bytes, c.peak_allocated_bytes, c.peak_allocated_bytes};
  }
  void reset_peak() override { reset_cpu_peak(); }
  void release_cache() override {}
  int64_t capacity_bytes() const override { return physical_memory_bytes(); }
  int64_t budget_bytes() const override {
    const int64_t b = cpu_memory_counters().budget_bytes;
    return b > 0 ? b : capacity_bytes();
  }
  void set_budget_bytes(int64_t bytes) override { set_cpu_budget_bytes(bytes); }
  c10::Device device() const override { return c10::Device(c10::DeviceType::CPU); }
};

}  // namespace

std::unique_ptr<MemoryMeter> make_memory_meter(const c10::Device& device) {
  if (device.is_cpu()) {
    install_cpu_budget_allocator();
    if (!cpu_budget_allocator_installed())
      throw InternalError("the CPU budget allocator could not be installed");
    start_cpu_math_libraries();  // before any parallel math: the same bits in every process
    return std::make_unique<CpuMemoryMeter>();
  }
  if (device.is_cuda()) return make_cuda_memory_meter(device.has_index() ? device.index() : 0);
  throw UsageError("memory meter: unsupported device type '" + device.str() + "' (expected cpu or cuda)");
}

#ifndef SATURATE_WITH_CUDA
std::unique_ptr<MemoryMeter> make_cuda_memory_meter(c10::DeviceIndex) {
  throw RuntimeFailure("this saturate was built against a LibTorch without CUDA; use `device` cpu");
}
#endif

}  // namespace saturate

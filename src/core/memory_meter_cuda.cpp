// CUDA memory meter: statistics of the caching allocator; the budget is its memory fraction.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "core/cuda_memory_meter.h"

namespace saturate {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex index) : index_(index) {
    capacity_bytes_ = static_cast<int64_t>(at::cuda::getDeviceProperties(index)->totalGlobalMem);
    budget_bytes_ = capacity_bytes_;
  }
  MemoryStats stats() const override {
    const auto s = alloc::getDeviceStats(index_);
    const size_t agg = 0;  // index 0 aggregates all pools
    return {s.allocated_bytes[agg].current, s.reserved_bytes[agg].current,
            s.allocated_bytes[agg].peak, s.reserved_bytes[agg].peak};
  }
  void reset_peak() override { alloc::resetPeakStats(index_); }
  void release_cache() override { alloc::emptyCache(); }
  int64_t capacity_bytes() const override { return capacity_bytes_; }
  int64_t budget_bytes() const override { return budget_bytes_; }
  void set_budget_bytes(int64_t bytes) override {
    budget_bytes_ = bytes > 0 ? std::min(bytes, capacity_bytes_) : capacity_bytes_;
    alloc::setMemoryFraction(static_cast<double>(budget_bytes_) / static_cast<double>(capacity_bytes_),
                             index_);
  }
  c10::Device device() const override { return c10::Device(c10::DeviceType::CUDA, index_); }

 private:
  c10::DeviceIndex index_;
  int64_t capacity_bytes_ = 0;
  int64_t budget_bytes_ = 0;
};

}  // namespace

std::unique_ptr<MemoryMeter> make_cuda_memory_meter(c10::DeviceIndex index) {
  return std::make_unique<CudaMemoryMeter>(index);
}

}  // namespace saturate

// Implements: one view of a device's memory for the probe and the search, whatever the device.
//  - CPU: the byte-budget allocator (cpu_budget_allocator.h) counts every CPU tensor byte and
//    throws c10::OutOfMemoryError past the budget, so a CPU run behaves like a GPU of that size.
//  - CUDA: the caching allocator's allocated/reserved statistics; the budget is applied as the
//    allocator's per-process memory fraction.
#pragma once
#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

namespace saturate {

struct MemoryStats {
  int64_t allocated_bytes = 0;       ///< bytes held by live tensors now
  int64_t reserved_bytes = 0;        ///< bytes the allocator holds from the device now
  int64_t peak_allocated_bytes = 0;  ///< since the last reset_peak()
  int64_t peak_reserved_bytes = 0;   ///< since the last reset_peak()
};

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  virtual MemoryStats stats() const = 0;
  /// Starts a new peak window at the current usage.
  virtual void reset_peak() = 0;
  /// Hands cached, unused blocks back to the device (CUDA emptyCache); nothing on CPU.
  virtual void release_cache() = 0;
  /// Total memory of the device (CPU: the machine's physical memory).
  virtual int64_t capacity_bytes() const = 0;
  /// The byte budget in force (capacity when none was set).
  virtual int64_t budget_bytes() const = 0;
  /// Sets the budget; allocations past it raise c10::OutOfMemoryError.
  virtual void set_budget_bytes(int64_t bytes) = 0;
  virtual c10::Device device() const = 0;
};

/// The meter for `device`. For CPU this installs the budget allocator if it is not yet installed
/// (which must happen before the first CPU tensor exists; see install_cpu_budget_allocator()).
std::unique_ptr<MemoryMeter> make_memory_meter(const c10::Device& device);

/// Default CPU budget: 4 GiB, a small GPU's worth.
constexpr int64_t kDefaultCpuBudgetBytes = int64_t{4} << 30;

}  // namespace saturate

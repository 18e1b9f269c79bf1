#include "saturate/core/cpu_budget_allocator.h"

#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include "saturate/core/units.h"

namespace saturate {
namespace {

class BudgetAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* ptr = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t bytes = static_cast<int64_t>(n);
      if (budget_bytes_ > 0 && allocated_bytes_ + bytes > budget_bytes_) {
        ++failed_allocations_;
        const int64_t in_use = allocated_bytes_;
        const int64_t budget = budget_bytes_;
        // OutOfMemoryError, as the CUDA allocator raises it, so callers handle both alike.
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU budget exceeded: tried to allocate ",
                         format_bytes(bytes), " with ", format_bytes(in_use), " of ",
                         format_bytes(budget), " in use (saturate --memory-budget)");
      }
      allocated_bytes_ += bytes;
      if (allocated_bytes_ > peak_allocated_bytes_) peak_allocated_bytes_ = allocated_bytes_;
    }
    try {
      ptr = n ? c10::alloc_cpu(n) : nullptr;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      allocated_bytes_ -= static_cast<int64_t>(n);
      throw;
    }
    if (ptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[ptr] = static_cast<int64_t>(n);
    }
    // data pointer == context with a real deleter: ideep's raw_allocate relies on it.
    return {ptr, ptr, &BudgetAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &BudgetAllocator::release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static void release(void* ptr) {
    if (!ptr) return;
    BudgetAllocator& self = instance();
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      auto it = self.sizes_.find(ptr);
      // pointers from before the switch were made by the default allocator: free them alike.
      if (it != self.sizes_.end()) {
        self.allocated_bytes_ -= it->second;
        self.sizes_.erase(it);
      }
    }
    c10::free_cpu(ptr);
  }

  static BudgetAllocator& instance() {
    static BudgetAllocator* a = new BudgetAllocator();  // never destroyed: tensors may outlive main
    return *a;
  }

  CpuMemoryCounters counters() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {allocated_bytes_, peak_allocated_bytes_, budget_bytes_, failed_allocations_};
  }
  void set_budget(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_bytes_ = bytes;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_allocated_bytes_ = allocated_bytes_;
  }

  bool installed = false;

 private:
  std::mutex mutex_;
  std::unordered_map<void*, int64_t> sizes_;
  int64_t allocated_bytes_ = 0;
  int64_t peak_allocated_bytes_ = 0;
  int64_t budget_bytes_ = 0;
  int64_t failed_allocations_ = 0;
};

}  // namespace

void install_cpu_budget_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    BudgetAllocator& a = BudgetAllocator::instance();
    c10::SetCPUAllocator(&a, /*priority=*/100);
    a.installed = c10::GetCPUAllocator() == &a;
  });
}

bool cpu_budget_allocator_installed() { return BudgetAllocator::instance().installed; }
CpuMemoryCounters cpu_memory_counters() { return BudgetAllocator::instance().counters(); }
void set_cpu_budget_bytes(int64_t bytes) { BudgetAllocator::instance().set_budget(bytes); }
void reset_cpu_peak() { BudgetAllocator::instance().reset_peak(); }

}  // namespace saturate

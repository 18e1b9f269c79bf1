#include "saturate/core/cpu_budget_allocator.h"

#include "saturate/core/errors.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include "saturate/core/units.h"

namespace saturate {
namespace {

thread_local const char* t_allocation_site = nullptr;

// Gloo's worker threads (ProcessGroupGloo names them "pt_gloo_runloop") allocate a collective's
// staging buffers while the step's thread runs on: where those land among the step's own
// allocations is the scheduler's, so with them counted the same step near the limit fits or runs
// out of memory by chance (an FSDP step at the search's max ran out 1 time in 3 to 8 in fresh
// processes). A GPU's allocator does not hold NCCL's buffers either; the budget counts the
// tensors the step and its collectives' callers make, not the communication library's own.
bool on_communication_thread() {
  thread_local int comm = -1;
  if (comm < 0) {
    char name[16] = {0};
    comm = pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 && std::strcmp(name, "pt_gloo_runloop") == 0;
  }
  return comm == 1;
}

class BudgetAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    if (on_communication_thread()) {  // not counted: released as memory from before the switch
      void* own = n ? c10::alloc_cpu(n) : nullptr;
      return {own, own, &BudgetAllocator::release, c10::Device(c10::DeviceType::CPU)};
    }
    void* ptr = nullptr;
    int64_t peak_before = -1;  // the peak before this allocation raised it (restored if it fails)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t bytes = static_cast<int64_t>(n);
      if (budget_bytes_ > 0 && allocated_bytes_ + bytes > budget_bytes_) {
        ++failed_allocations_;
        if (log_on_) record(CpuAllocationEvent::kFailed, bytes, nullptr);
        const int64_t in_use = allocated_bytes_;
        const int64_t budget = budget_bytes_;
        // OutOfMemoryError, as the CUDA allocator raises it, so callers handle both alike. The
        // message ends with the words of LibTorch's own CPU allocator failing, which is what
        // Python tools test for (Lightning's is_oom_error, Accelerate's should_reduce_batch_size),
        // so that they see a budget like a full device too.
        TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU budget exceeded: tried to allocate ",
                         format_bytes(bytes), " with ", format_bytes(in_use), " of ",
                         format_bytes(budget), " in use (", budget_name_, "; DefaultCPUAllocator: can't allocate memory)");
      }
      allocated_bytes_ += bytes;
      if (allocated_bytes_ > peak_allocated_bytes_) {
        peak_before = peak_allocated_bytes_;
        peak_allocated_bytes_ = allocated_bytes_;
      }
    }
    try {
      ptr = n ? c10::alloc_cpu(n) : nullptr;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      allocated_bytes_ -= static_cast<int64_t>(n);
      if (peak_before >= 0) peak_allocated_bytes_ = std::max(peak_before, allocated_bytes_);
      // within the budget and still refused: the operating system's limit (ulimit -v, a cgroup)
      // is below the budget. Not an OOM of the step: a search must not take it for the budget's
      // edge and call its answer exact. The words avoid what OOM checks look for.
      if (budget_bytes_ > 0)
        throw RuntimeFailure("the operating system refused " + format_bytes(static_cast<int64_t>(n)) + " with " +
                             format_bytes(allocated_bytes_) + " of the " + format_bytes(budget_bytes_) + " budget (" +
                             budget_name_ + ") in use: a limit below the budget (ulimit -v, a cgroup's memory.max, "
                             "the machine's free memory) ends the process first; give a budget below that limit");
      throw;
    }
    if (ptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[ptr] = static_cast<int64_t>(n);
      if (log_on_) record(CpuAllocationEvent::kAlloc, static_cast<int64_t>(n), ptr);
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
        if (self.log_on_) self.record(CpuAllocationEvent::kFree, it->second, ptr);
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
  void set_budget_name(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_name_ = name;
  }
  void set_budget(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    budget_bytes_ = bytes;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_allocated_bytes_ = allocated_bytes_;
  }

  void start_log(size_t max_events) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_ = CpuEventLog{};
    log_.start_allocated_bytes = allocated_bytes_;
    log_.events.reserve(std::min<size_t>(max_events, size_t{1} << 16));
    log_max_ = max_events;
    log_on_ = true;
  }
  CpuEventLog stop_log() {
    std::lock_guard<std::mutex> lock(mutex_);
    log_on_ = false;
    CpuEventLog out = std::move(log_);
    log_ = CpuEventLog{};
    return out;
  }
  size_t log_size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_on_ ? log_.events.size() : 0;
  }
  bool log_active() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_on_;
  }

  /// Counts a default-allocator storage from now on (its free included): see adopt_cpu_storage.
  bool adopt(c10::DataPtr& data, int64_t bytes) {
    c10::Allocator* fallback = c10::GetDefaultCPUAllocator();
    const c10::DeleterFnPtr theirs = fallback ? fallback->raw_deleter() : nullptr;
    void* ptr = data.get();
    if (!theirs || !ptr || data.get_context() != ptr || data.device().type() != c10::DeviceType::CPU) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (sizes_.count(ptr) || !data.compare_exchange_deleter(theirs, &BudgetAllocator::release)) return false;
    sizes_[ptr] = bytes;
    allocated_bytes_ += bytes;
    peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
    return true;
  }

  bool installed = false;   // for the rest of the process (install_cpu_budget_allocator)
  std::mutex charge_mutex;  // the nest of acquires
  int acquired = 0;
  c10::Allocator* before = nullptr;  // in charge before the first acquire of the nest

 private:
  // with mutex_ held.
  void record(CpuAllocationEvent::Kind kind, int64_t bytes, void* ptr) {
    if (log_.events.size() >= log_max_) {
      log_.truncated = true;
      return;
    }
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    log_.events.push_back(
        {kind, bytes, reinterpret_cast<uintptr_t>(ptr), now, kind == CpuAllocationEvent::kAlloc ? t_allocation_site : nullptr});
  }

  std::mutex mutex_;
  std::unordered_map<void*, int64_t> sizes_;
  int64_t allocated_bytes_ = 0;
  int64_t peak_allocated_bytes_ = 0;
  int64_t budget_bytes_ = 0;
  std::string budget_name_ = "saturate `memory_budget`";
  int64_t failed_allocations_ = 0;
  bool log_on_ = false;
  size_t log_max_ = 0;
  CpuEventLog log_;
};

}  // namespace

bool cpu_budget_allocator_installed() {
  BudgetAllocator& a = BudgetAllocator::instance();
  return c10::GetCPUAllocator() == &a;
}

// The priority LibTorch's SetCPUAllocator takes: the highest, so that giving the allocator back
// is not refused by the priority the counting one was set with.
constexpr uint8_t kInCharge = 255;

// Installed for good unless already in charge: a Python call acquired it for its length (a meter
// made inside that call must not keep it in charge after).
void install_cpu_budget_allocator() {
  BudgetAllocator& a = BudgetAllocator::instance();
  std::lock_guard<std::mutex> lock(a.charge_mutex);
  if (a.installed || c10::GetCPUAllocator() == &a) return;
  c10::SetCPUAllocator(&a, kInCharge);
  a.installed = c10::GetCPUAllocator() == &a;
}

bool acquire_cpu_budget_allocator() {
  BudgetAllocator& a = BudgetAllocator::instance();
  std::lock_guard<std::mutex> lock(a.charge_mutex);
  if (a.acquired++ > 0 || a.installed) return false;
  a.before = c10::GetCPUAllocator();
  if (a.before == &a) return false;
  c10::SetCPUAllocator(&a, kInCharge);
  return c10::GetCPUAllocator() == &a;
}

void release_cpu_budget_allocator() {
  BudgetAllocator& a = BudgetAllocator::instance();
  std::lock_guard<std::mutex> lock(a.charge_mutex);
  if (a.acquired == 0 || --a.acquired > 0 || a.installed) return;
  if (a.before && a.before != &a && c10::GetCPUAllocator() == &a) c10::SetCPUAllocator(a.before, kInCharge);
  a.before = nullptr;
}

bool adopt_cpu_storage(c10::StorageImpl& storage) {
  return BudgetAllocator::instance().adopt(storage._mutable_data_ptr_no_checks(), static_cast<int64_t>(storage.nbytes()));
}
CpuMemoryCounters cpu_memory_counters() { return BudgetAllocator::instance().counters(); }
void set_cpu_budget_bytes(int64_t bytes) { BudgetAllocator::instance().set_budget(bytes); }
void reset_cpu_peak() { BudgetAllocator::instance().reset_peak(); }
void set_cpu_budget_name(const std::string& name) { BudgetAllocator::instance().set_budget_name(name); }
void start_cpu_event_log(size_t max_events) { BudgetAllocator::instance().start_log(max_events); }
CpuEventLog stop_cpu_event_log() { return BudgetAllocator::instance().stop_log(); }
size_t cpu_event_log_size() { return BudgetAllocator::instance().log_size(); }
bool cpu_event_log_active() { return BudgetAllocator::instance().log_active(); }
void set_cpu_allocation_site(const char* site) { t_allocation_site = site; }

}  // namespace saturate

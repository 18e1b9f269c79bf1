// Implements: a byte-counting wrapper around LibTorch's CPU allocator with a budget.
// Installed with c10::SetCPUAllocator before any CPU tensor exists (the command line, the tests),
// or put in charge only while a library call measures (the Python package: acquire, adopt the
// live tensors' storages, release), it sees every CPU tensor
// byte (parameters, gradients, optimizer state, activations, autograd buffers) and throws
// c10::OutOfMemoryError when an allocation would pass the budget, as the CUDA caching
// allocator does when the device is full. Not seen: pinned host memory, oneDNN/BLAS scratch
// buffers, autograd graph nodes, tensors made with from_blob, and what Gloo's worker threads
// allocate for a collective (its staging buffers, as NCCL's are outside a GPU's allocator; the
// collective's inputs and outputs, made by the caller, are counted).
// An optional event log (off by default; one branch per allocation when off) records every
// allocation and free with its size, address and time, for memory timelines and replays.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace c10 {
struct StorageImpl;
}

namespace saturate {

struct CpuMemoryCounters {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t budget_bytes = 0;  ///< 0: no budget
  int64_t failed_allocations = 0;
};

/// Installs the counting allocator for the rest of the process (idempotent). Call first thing
/// in main().
void install_cpu_budget_allocator();
/// Whether the counting allocator makes new CPU tensors now (installed, or acquired).
bool cpu_budget_allocator_installed();

/// Puts the counting allocator in charge of new CPU tensors until the matching release (nested
/// calls are counted; one lock for all). Returns true when this call put it in charge (the first
/// of a nest, not installed): then storages made before are not counted until adopted.
bool acquire_cpu_budget_allocator();
/// Ends an acquire; the last one of a nest gives the allocator that was in charge before it back
/// (unless another was put in charge meanwhile: that one stays). Tensors made meanwhile stay
/// counted until they are freed.
void release_cpu_budget_allocator();
/// Counts a storage that LibTorch's default CPU allocator made (before the counting one was in
/// charge): its bytes from now on, and its free when it goes. Returns false, and changes nothing,
/// for a storage made otherwise (already counted, from_blob, numpy's, mmap, another allocator's).
bool adopt_cpu_storage(c10::StorageImpl& storage);

CpuMemoryCounters cpu_memory_counters();
/// 0 removes the budget.
void set_cpu_budget_bytes(int64_t bytes);
/// What an allocation past the budget says set the budget, in its message's parentheses:
/// "saturate `memory_budget`" unless a front-end names it its own way (the command line: its
/// flag). Call before the first allocation that may fail.
void set_cpu_budget_name(const std::string& name);
void reset_cpu_peak();

/// One event of the CPU allocator's log.
struct CpuAllocationEvent {
  enum Kind : uint8_t { kAlloc, kFree, kFailed };  ///< kFailed: refused by the budget (OOM)
  Kind kind = kAlloc;
  int64_t bytes = 0;
  uintptr_t address = 0;  ///< 0 for kFailed
  int64_t time_ns = 0;    ///< steady clock
  /// kAlloc: what was running on the allocating thread (set_cpu_allocation_site); nullptr: unknown.
  const char* site = nullptr;
};

struct CpuEventLog {
  std::vector<CpuAllocationEvent> events;
  int64_t start_allocated_bytes = 0;  ///< allocated bytes when the log started
  bool truncated = false;             ///< more than max_events happened; the rest was dropped
};

/// Starts recording allocations and frees (clears an earlier log). Frees of memory allocated
/// before the start are recorded too (their sizes are known). Off by default.
void start_cpu_event_log(size_t max_events = size_t{1} << 22);
/// Stops recording and hands the log over.
CpuEventLog stop_cpu_event_log();
/// Events recorded so far (a position in the log, for phase marks); 0 when the log is off.
size_t cpu_event_log_size();
bool cpu_event_log_active();

/// Names what this thread is running, for the event log's kAlloc events (memory/allocation_sites.h
/// sets it from the operator being run). The string must outlive the log; nullptr: unknown.
void set_cpu_allocation_site(const char* site);

}  // namespace saturate

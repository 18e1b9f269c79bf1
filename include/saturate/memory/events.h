// Implements: a device-neutral log of a run's allocations, with phase marks.
// The CPU log comes from the byte-counting allocator's event log, the CUDA one from the caching
// allocator's history; the breakdown, the timeline and the planner read only this. No LibTorch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace saturate {

struct MemoryEvent {
  enum Kind : uint8_t { kAlloc, kFree, kOom };
  Kind kind = kAlloc;
  int64_t bytes = 0;     ///< requested bytes (kOom: the request that failed)
  uint64_t address = 0;  ///< pairs a free with its allocation
  int64_t time_ns = 0;   ///< any clock; only differences are used
};

/// A point in the log: `event_index` events had happened when the mark was set.
struct PhaseMark {
  size_t event_index = 0;
  int64_t time_ns = 0;
  int step = -1;       ///< -1: outside the steps (the trial's set-up)
  std::string phase;   ///< "step", "inputs", "forward", "backward", "optimizer", "data_wait", "h2d", ...
  bool begin = true;   ///< begin or end of the phase
  bool measured = true;  ///< for "step": false for warm-up steps
};

struct MemoryEventLog {
  std::vector<MemoryEvent> events;
  std::vector<PhaseMark> marks;          ///< in event order
  int64_t start_allocated_bytes = 0;     ///< live bytes when the log started (parameters, buffers, ...)
  int64_t start_time_ns = 0;
  int64_t reserved_overhead_bytes = 0;   ///< peak reserved - peak allocated, when the device caches (CUDA)
  int64_t peak_reserved_bytes = 0;       ///< 0: not known (then taken as the peak allocated)
  bool truncated = false;
  std::string source;                    ///< "cpu allocator event log" | "cuda caching allocator history"
};

}  // namespace saturate

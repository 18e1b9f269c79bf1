// Implements: where the memory of a training step goes (seed B2's list), from an allocation log.
// At the moment of the peak, every live byte is put in one part by when it was allocated and
// whether it outlived its phase:
//   parameters       exact: the trainable tensors' sizes (given)
//   other            held before the trial but not a parameter (buffers such as BN statistics)
//   inputs           allocated before the first step (the batch) or while loading data
//   activations      allocated in a forward pass and still live (saved for backward, outputs)
//   gradients        allocated in a backward pass and kept after it (the .grad tensors)
//   optimizer state  allocated in an optimizer step and kept after it (Adam's two moments)
//   workspace        allocated in backward/optimizer and freed within it (temporaries)
//   allocator overhead  peak reserved - peak allocated (cache and rounding; 0 on the CPU budget)
// The parts add up to the measured peak exactly (the log is the allocator's own record).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "saturate/memory/events.h"

namespace saturate {

struct LiveAllocation {
  int64_t bytes = 0;
  std::string part;   ///< "inputs", "activations", "gradients", "optimizer_state", "workspace"
  std::string phase;  ///< the phase it was allocated in ("setup" before the first step)
  int step = -1;
  size_t event_index = 0;  ///< its allocation event
};

struct MemoryBreakdown {
  int64_t parameters_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t inputs_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t other_bytes = 0;
  int64_t allocator_overhead_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  /// Live forward allocations at the end of the last complete forward pass.
  int64_t saved_for_backward_bytes = 0;
  int peak_step = -1;
  std::string peak_phase;
  size_t peak_event_index = 0;
  std::vector<LiveAllocation> largest_at_peak;
  std::string source;
  bool truncated = false;
  /// Sum of the parts (without the allocator overhead): equals peak_allocated_bytes.
  int64_t parts_sum_bytes() const;
};

/// Analyses `log`; `parameters_bytes` are the trainable tensors' exact sizes (part of the
/// bytes live when the log started). Keeps the `top_n` largest live allocations at the peak.
MemoryBreakdown analyze_memory(const MemoryEventLog& log, int64_t parameters_bytes, size_t top_n = 10);

/// The allocations live just after event `event_index` (all events up to it applied).
std::vector<LiveAllocation> live_allocations(const MemoryEventLog& log, size_t event_index);

/// The `memory_breakdown` JSON object.
nlohmann::json breakdown_json(const MemoryBreakdown& b);
/// A table for people: each part, its share of the peak, and how it was obtained.
std::string breakdown_table(const MemoryBreakdown& b);

}  // namespace saturate

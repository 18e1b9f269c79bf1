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

#include <nlohmann/json_fwd.hpp>

#include "saturate/memory/events.h"
#include "saturate/probe/findings.h"

namespace saturate {

// MemoryBreakdown and LiveAllocation are trial findings: probe/findings.h (to_json there).

/// Analyses `log`; `parameters_bytes` are the trainable tensors' exact sizes (part of the
/// bytes live when the log started). Keeps the `top_n` largest live allocations at the peak.
MemoryBreakdown analyze_memory(const MemoryEventLog& log, int64_t parameters_bytes, size_t top_n = 10);

/// The allocations live just after event `event_index` (all events up to it applied).
std::vector<LiveAllocation> live_allocations(const MemoryEventLog& log, size_t event_index);


}  // namespace saturate

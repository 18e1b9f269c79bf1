// Implements: planning from a run here: two probe trials at small batches with the memory
// observer recording their allocations, then plan_batch() (plan.h) on the two traces.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/memory/plan.h"
#include "saturate/probe/probe.h"

namespace saturate {

struct PlanRunOptions {
  PlanTarget target;
  AllocatorKind allocator = AllocatorKind::kCudaCaching;
  double target_fraction = 0.9;
  int64_t batch_a = 4;  ///< the two recorded batches (distinct; they must fit here)
  int64_t batch_b = 8;
  int64_t context_bytes = -1;  ///< -1: the default for the allocator (plan.h)
};

/// Parses "4,8" into two distinct positive batches; throws UsageError naming --plan-batches.
std::pair<int64_t, int64_t> parse_plan_batches(const std::string& text);

/// Records one warm-up and one measured step at each batch on `workload` and plans. Throws
/// RuntimeFailure when a recorded batch does not run here.
PlanResult plan_from_run(Workload& workload, MemoryMeter& meter, const PlanRunOptions& options);
/// The same on any step (a user's own): `parameters` are the resident tensors (the model's).
PlanResult plan_from_run(TrialStep& step, std::vector<torch::Tensor> parameters, MemoryMeter& meter,
                         const PlanRunOptions& options);

}  // namespace saturate

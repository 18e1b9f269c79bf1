// Implements: `saturate memory` for any trial step: warm-up steps, one recorded step at a
// batch, and where the peak's bytes went (breakdown.h). For a user's own step the parts follow
// the phases it marks with PhaseScope; the parameters part is the tensors given.
#pragma once
#include <cstdint>
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/memory/breakdown.h"
#include "saturate/probe/trial.h"
#include "saturate/probe/trial_step.h"

namespace saturate {

struct StepMemory {
  Trial trial;                  ///< the recorded trial (an OOM is a result here too)
  MemoryBreakdown breakdown;    ///< of the trial's peak
};

/// Runs `warmup_steps` and one recorded step of `step` at `batch` under `meter`'s budget.
/// `parameters`: the model's tensors held across steps (the breakdown's parameters part).
StepMemory measure_step_memory(TrialStep& step, MemoryMeter& meter, int64_t batch,
                               const std::vector<torch::Tensor>& parameters, int warmup_steps = 1);

}  // namespace saturate

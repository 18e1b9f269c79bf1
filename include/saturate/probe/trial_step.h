// Implements: what a trial runs, step after step. The probe owns everything around it (budget,
// baseline, peak, timing with device synchronisation, OOM as a result, clean-up, observers);
// a TrialStep only makes and runs the step:
//  - WorkloadTrialStep (workload_trial_step.h): the built-in and TorchScript models, with the
//    precision, checkpointing, accumulation and resident data that training will hold;
//  - UserTrialStep (user_step.h): a user's own callable that runs one training step.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include "saturate/probe/findings.h"
#include "saturate/step/phase_observer.h"

namespace saturate {

class TrialStep {
 public:
  virtual ~TrialStep() = default;
  virtual torch::Device device() const = 0;
  /// Before the first step of a trial at `batch` samples: makes what lives for the whole trial.
  virtual void begin(int64_t batch) {}
  /// One training step of `batch` samples. `observer` (may be null) is told of its phases.
  virtual void step(int64_t batch, PhaseObserver* observer) = 0;
  /// After the measured steps of a trial that did not fail: what the run also does at this batch
  /// outside its steps (an evaluation pass), so that its memory counts too. Not timed.
  virtual void finish(int64_t batch) {}
  /// After the trial, whether it succeeded or threw: drops what the trial made (optimizer state,
  /// gradients, batches). Must not throw.
  virtual void end() noexcept {}
  /// Samples one step of a trial at `batch` processes (samples/s divides by the step time).
  virtual int64_t samples_per_step(int64_t batch) const { return batch; }
  /// How the step was set up (precision, checkpointing, ...), for the trial's findings.
  virtual void describe(StepDescription& setup) const {}
};

}  // namespace saturate

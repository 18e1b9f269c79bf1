// Implements: running one training configuration safely and measuring it (a trial).
// Warm-up steps, then timed training steps with device synchronisation; the median step time,
// samples/s and peak allocated/reserved bytes. What a step is comes from a TrialStep: the
// built-in models' TrainingStep (the one `saturate train` runs, with its precision,
// checkpointing, accumulation and resident data) or a user's own step. An out-of-memory is a
// result: everything the trial allocated is released (optimizer state, gradients, the batch,
// the autograd graph), memory returns to the pre-trial baseline and the process stays healthy
// for the next trial.
#pragma once
#include <memory>
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/probe/trial.h"
#include "saturate/probe/trial_step.h"
#include "saturate/probe/workload_trial_step.h"
#include "saturate/step/workload.h"

namespace saturate {

class Probe final : public TrialRunner {
 public:
  /// Trials of the workload's training step (a WorkloadTrialStep the probe owns).
  Probe(Workload& workload, MemoryMeter& meter);
  /// Trials of any step (not owned), e.g. a user's own (UserTrialStep).
  Probe(TrialStep& step, MemoryMeter& meter);
  Trial run(int64_t batch, const TrialRequest& request) override;
  int64_t budget_bytes() const override;
  /// 2 MiB on CUDA (the caching allocator's small-segment size); 0 on the CPU budget.
  int64_t granularity_bytes() const override;
  /// Observers are told about every trial, step and phase (not owned).
  void add_observer(ProbeObserver* observer) { observers_.push_back(observer); }
  /// Cache policy (seed M1): the device cache is emptied after an out-of-memory only, unless
  /// this asks for it before every trial too (--empty-cache). Each emptying is timed and shown
  /// in the trial's JSON (`empty_cache_ms`, `empty_cache_calls`).
  void set_empty_cache_before_trials(bool on) { empty_cache_before_trials_ = on; }
  MemoryMeter& meter() { return meter_; }

  // The built-in step's settings (a Probe made from a Workload; UsageError otherwise).
  /// The training configuration trials mirror (precision, checkpointing, accumulation, data).
  void set_footprint(const TrainingFootprint& footprint) { workload_step().set_footprint(footprint); }
  const TrainingFootprint& footprint() { return workload_step().footprint(); }
  /// Activation checkpointing in every trial's forward pass (built-in models: their blocks);
  /// trials then record `checkpointing` in their JSON. Throws UsageError for a model without
  /// blocks (a TorchScript file) when the policy is enabled.
  void set_checkpointing(const CheckpointPolicy& policy);
  const CheckpointPolicy& checkpointing() { return workload_step().footprint().checkpointing; }
  /// Batches from `source` instead of one synthetic batch (not owned; nullptr: synthetic).
  void set_batch_source(BatchSource* source) { workload_step().set_batch_source(source); }
  Workload& workload() { return workload_step().workload(); }
  WorkloadTrialStep& workload_step();

 private:
  class Fanout;
  struct StepTimes;
  void synchronize() const;
  /// The trial's steps (warm-up, then measured), each timed; the stop signal that ended them (0: none).
  int run_steps(int64_t batch, const TrialRequest& request, Fanout& fanout, Trial& t, StepTimes& times);
  template <class F>
  void notify(F f) {
    for (ProbeObserver* o : observers_) f(*o);
  }
  std::unique_ptr<WorkloadTrialStep> owned_step_;
  TrialStep& step_;
  MemoryMeter& meter_;
  std::vector<ProbeObserver*> observers_;
  bool empty_cache_before_trials_ = false;
};

}  // namespace saturate

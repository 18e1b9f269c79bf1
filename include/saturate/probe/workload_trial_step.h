// Implements: the trial step of a built-in or TorchScript model: the one TrainingStep that
// `saturate train` runs, with the configuration training will run it with. What a training run
// holds beside the step counts too (seed B2: the inputs are part of the peak):
//  - accumulation: training splits a global batch into micro-batches of the trial's size; the
//    trial then holds a whole global batch and runs two of its micro-batches per step (the
//    second backward accumulates into existing gradients, as training's do);
//  - the loader's window: training's loader keeps `prefetched_batches` batches in flight beside
//    the one in use: global batches, or micro-batches when the loader works in micro-batch
//    pieces (`prefetches_micro_batches`, as `saturate train` does); on a CPU device they live in
//    the same memory and are held for the trial (on CUDA they are pinned host memory and do not
//    count against the device);
//  - evaluation: after its steps (gradients still alive, as at an epoch's end) a no-grad forward
//    at the evaluation batch, with the evaluation loader's window.
// Sizing the evaluation itself (`eval_search_micro_batch`): the trial's batch is the evaluation
// batch. Each trial holds what training holds when it evaluates at that micro-batch (gradients,
// the optimizer's state, the in-use global batch, both loaders' windows), made without a training
// step (so its peak does not hide the evaluation's), and each step is a no-grad forward in eval
// mode with the loss (seed M3: the evaluation's batch is its own, usually several times training's).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "saturate/probe/probe_hooks.h"
#include "saturate/probe/trial_step.h"
#include "saturate/step/training_step.h"

namespace saturate {

/// How a trial mirrors the training run it sizes. The default is a plain step: the trial's batch
/// is the whole batch, no data held beside it, no evaluation.
struct TrainingFootprint : StepConfig {
  /// Samples per optimizer step on this rank (>= 1); nullopt: the trial's batch times
  /// `accumulation`.
  std::optional<int64_t> global_batch;
  /// Without a global batch: micro-batches per optimizer step (>= 1; 1: none), so the global
  /// batch grows with the trial's micro-batch.
  int64_t accumulation = 1;
  /// Batches the loader keeps in flight beside the one in use (workers x prefetch).
  int64_t prefetched_batches = 0;
  /// The window holds micro-batches (the trial's batch; LoaderOptions::parts), not global batches.
  bool prefetches_micro_batches = false;
  /// Evaluation batch; 0 with eval_batch_per_micro 0: no evaluation.
  int64_t eval_batch = 0;
  /// Evaluation batch as a multiple of the trial's micro-batch (used when eval_batch is 0).
  int64_t eval_batch_per_micro = 0;
  /// Evaluation batches the evaluation loader keeps in flight.
  int64_t eval_prefetched_batches = 0;
  /// Bytes the run holds on the device that no trial step makes: under DDP, the reducer's
  /// gradient buckets (a copy of every gradient) and a bucket in flight. Held for the trial.
  int64_t held_beside_bytes = 0;
  /// Bytes the run holds only while a step runs, not while the loader joins the next batch: under
  /// DDP, the bucket the all-reduce has in flight. Held for each trial step's compute.
  int64_t held_in_step_bytes = 0;
  /// > 0: the trials size the evaluation: training's state at this micro-batch is held and the
  /// trial's batch is the evaluation batch (eval_batch and eval_batch_per_micro are not used).
  int64_t eval_search_micro_batch = 0;
  /// Throws UsageError naming the field for negative values.
  void validate() const;
};

class WorkloadTrialStep final : public TrialStep {
 public:
  explicit WorkloadTrialStep(Workload& workload, TrainingFootprint footprint = {});
  /// Throws UsageError for checkpointing on a model without blocks and for fp16 on CPU.
  void set_footprint(const TrainingFootprint& footprint);
  const TrainingFootprint& footprint() const { return footprint_; }
  /// Batches from `source` instead of synthetic ones (not owned; nullptr: synthetic). The
  /// time spent waiting for it is the data_wait phase.
  void set_batch_source(BatchSource* source) { source_ = source; }
  Workload& workload() { return workload_; }
  /// Bytes the trial holds for the loader's window and the in-use global batch at `batch`.
  int64_t resident_data_bytes(int64_t batch) const;
  /// Samples in each of the loader's prefetched batches at trial batch `batch`.
  int64_t window_batch(int64_t batch) const;

  torch::Device device() const override { return workload_.device(); }
  void begin(int64_t batch) override;
  void step(int64_t batch, PhaseObserver* observer) override;
  void finish(int64_t batch) override;
  void end() noexcept override;
  void describe(StepDescription& setup) const override;
  /// Two micro-batches when training accumulates (the trial's batch below the global batch).
  int64_t samples_per_step(int64_t batch) const override;

 private:
  int64_t eval_batch(int64_t batch) const;
  /// Training's micro-batch in a trial of `batch` (the evaluation search's, when it sizes that).
  int64_t train_batch(int64_t batch) const;
  /// One no-grad forward and loss in eval mode at `batch` (the model back in train mode after).
  void evaluate(int64_t batch);
  /// The global batch training holds when its micro-batch is `batch`.
  int64_t global_batch_of(int64_t batch) const;
  Workload& workload_;
  TrainingFootprint footprint_;
  BatchSource* source_ = nullptr;
  std::unique_ptr<ProcessSwitches> switches_;  ///< the trial's process-wide fast paths
  std::unique_ptr<TrainingStep> step_;
  Batch data_;
  std::vector<Batch> window_;
  int64_t last_batch_ = 0;  ///< training's micro-batch in the last trial
  int64_t last_trial_batch_ = 0;
  std::vector<Batch> eval_window_;
  torch::Tensor held_beside_;
};

}  // namespace saturate

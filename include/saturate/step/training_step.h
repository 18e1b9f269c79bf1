// Implements: the one training step that the probe's trials, `saturate train` and the leak
// check all run. A step consumes one batch (the global batch of this rank), split into
// micro-batches: each is copied to the device, run forward under autocast (bf16/fp16) with
// optional activation checkpointing, its loss weighted by its share of the batch (so the
// optimizer sees exactly the batch's mean gradient whatever the split), scaled (fp16) and run
// backward; then gradients are clipped (optional) and the optimizer steps through the grad
// scaler. Data parallelism plugs in through StepSync, timing through a PhaseObserver.
#pragma once
#include <cstdint>
#include <memory>

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "saturate/step/activation_checkpoint.h"
#include "saturate/step/fast_paths.h"
#include "saturate/step/gradient_noise.h"
#include "saturate/step/grad_scaler.h"
#include "saturate/step/graphed_step.h"
#include "saturate/step/phase_observer.h"
#include "saturate/step/precision.h"
#include "saturate/step/step_config.h"
#include "saturate/step/step_sync.h"
#include "saturate/step/workload.h"

namespace saturate {

/// The step's settings (precision, checkpointing, clipping, fast paths: StepConfig) and how
/// this step runs them.
struct StepOptions : StepConfig {
  int64_t micro_batch = 0;         ///< samples per forward/backward; 0: the whole batch at once
  /// Keep each step's autograd graph alive after backward (reproduces a user's kept-loss leak).
  bool retain_graph = false;
  StepSync* sync = nullptr;         ///< not owned; nullptr: one process
  PhaseObserver* observer = nullptr;  ///< not owned; told of h2d, forward, backward, optimizer
  /// Not owned; nullptr: none. Each step adds the squared norms of its first micro-batch's
  /// gradient (this rank's) and of the whole step's (all ranks') to it, before clipping. A step
  /// of one micro-batch is run as two halves for it (the same mean gradient; smaller peak memory).
  /// Not with cuda_graphs or a sync within one process (DataParallel).
  GradientNoiseScale* noise = nullptr;
};

struct StepResult {
  /// The batch's mean loss, a scalar on the device (read it with item(): a sync); double when
  /// summed over micro-batches or ranks, the loss's own dtype for one micro-batch.
  torch::Tensor loss;
  /// With StepOptions::retain_graph: the last micro-batch's loss with its graph.
  torch::Tensor graph_loss;
  bool stepped = true;  ///< false: fp16 gradients were not finite and the optimizer skipped
};

/// UsageError when `workload` cannot run a step of this precision and checkpointing: fp16 on CPU
/// (no fp16 autocast there), checkpointing on a model without blocks (a TorchScript file).
void check_step_options(Workload& workload, Precision precision, const CheckpointPolicy& checkpointing);

class TrainingStep {
 public:
  /// Makes the optimizer (its state comes with the first step) and the grad scaler (fp16 only).
  /// Throws UsageError for fp16 on CPU, for a non-positive micro-batch, and for fast path
  /// cuda_graphs off a GPU or with what a graph cannot hold (fp16 loss scaling, gradient
  /// clipping, activation checkpointing, a kept graph, ranks to synchronize with).
  TrainingStep(Workload& workload, StepOptions options);
  ~TrainingStep();

  /// One optimizer step over `batch` (host or device tensors; micro-batches are copied to the
  /// workload's device). Throws what the step threw (an out-of-memory among them) and
  /// PeerOutOfMemory when another rank ran out of memory; the caller then calls release().
  StepResult run(const Batch& batch);
  /// Drops the gradients (after a failed step, or at the end of a trial).
  void release_gradients();

  void set_micro_batch(int64_t micro_batch);
  void set_observer(PhaseObserver* observer) { options_.observer = observer; }
  /// Measure the gradient noise scale from the next step on (nullptr: stop); UsageError where
  /// StepOptions::noise is not allowed.
  void set_noise(GradientNoiseScale* noise);
  int64_t micro_batch() const { return options_.micro_batch; }
  const StepOptions& options() const { return options_; }
  /// Data-parallel: the current attempt passed StepSync::agree (its backward communicates, so
  /// an OOM after this point cannot be backed off together).
  bool agreed() const { return agreed_; }

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  GradScaler& scaler() { return scaler_; }
  Workload& workload() { return workload_; }
  /// The model's forward under the step's precision and checkpointing (for evaluation too).
  torch::Tensor forward(const torch::Tensor& inputs);
  /// With fast path cuda_graphs: the graph (nullptr otherwise).
  const GraphedStep* graphed() const { return graph_.get(); }

 private:
  StepResult run_eager(const Batch& batch);
  void make_graph();

  Workload& workload_;
  StepOptions options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  GradScaler scaler_;
  BlockModelImpl* blocks_ = nullptr;
  bool agreed_ = false;
  std::unique_ptr<GraphedStep> graph_;
};

}  // namespace saturate

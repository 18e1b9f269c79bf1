// Implements: data parallelism's hook points in a training step (dist/ddp_sync.h implements them
// with DDP, dist/data_parallel.h within one process), and the signal that another rank ran out
// of memory in the step.
#pragma once
#include <vector>
#include <stdexcept>

#include <torch/types.h>

namespace saturate {

class StepSync {
 public:
  virtual ~StepSync() = default;
  /// After the model and optimizer exist (and a resume loaded): make every rank's model equal.
  virtual void begin_run() {}
  /// Before a micro-batch's forward; `last`: the last micro-batch of the optimizer step.
  virtual void before_forward(bool last) {}
  /// Runs `loss.backward()`; only the last micro-batch's backward communicates (no_sync before).
  virtual void backward(const torch::Tensor& loss, bool last) = 0;
  /// Of the last backward(), the milliseconds spent waiting for communication after the
  /// gradients were computed (the all-reduce not hidden behind the backward; 0 when it did
  /// not communicate). The monitor moves it from the backward phase to the allreduce phase.
  virtual double exposed_allreduce_ms() { return 0; }
  /// False for a sync within one process (DataParallel): no collective, nothing to agree on, and
  /// an OOM anywhere in the step backs off like a plain run.
  virtual bool communicates() const { return true; }
  /// Number of ranks.
  virtual int world_size() const { return 1; }
  /// The samples of a step over all ranks when this rank's step holds `rank_samples` (times the
  /// ranks with equal shares; a rank of unequal shares knows its share of the whole).
  virtual int64_t global_samples(int64_t rank_samples) const { return rank_samples * world_size(); }
  /// Once per attempt of a step, before the backward that communicates (or, after an OOM, from
  /// the back-off): `oom` says this rank ran out of memory in the step; `loss` is this rank's
  /// step loss, replaced by the mean over the ranks. `tokens`: the real (not padding) target
  /// tokens of this rank's batch when its loss is a mean over tokens, else 0; `padded`: some
  /// were padding (documents of unequal lengths). When every rank counts tokens and some rank's
  /// batch is padded, the ranks' losses and gradients are weighted by their tokens (the global
  /// batch's token mean), not by their samples. Returns true when any rank ran out of memory:
  /// every rank then halves its micro-batch and redoes the step, none hangs.
  virtual bool agree(bool oom, double& loss, double tokens, bool padded) { return oom; }
  /// Every rank calls it at the same point: each value becomes its mean over the ranks (numbers
  /// that decisions are made on, such as the gradient noise scale's averages).
  virtual std::vector<double> mean(std::vector<double> values) { return values; }
};

/// Thrown by a step when StepSync::agree said another rank ran out of memory: back off with it.
struct PeerOutOfMemory final : std::runtime_error {
  PeerOutOfMemory() : std::runtime_error("another rank ran out of memory") {}
};

}  // namespace saturate

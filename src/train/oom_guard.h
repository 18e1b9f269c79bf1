// Implements: the OOM guard around a LibTorch user's own training step (issue #26), the C++ twin
// of Python's saturate.OomGuard; both decide with MicroBatchMemory, as `saturate train`'s
// back-off does. A batch that runs out of memory is freed (its graph dies with the exception; the
// partial gradients are dropped), split into micro-batches whose losses are weighted by their
// share of the batch (rows, or real tokens for padded token targets), and the optimizer steps
// once: the update is the whole batch's to rounding and the global batch is kept.
//
//   saturate::OomGuard guard([&](const saturate::Batch& b) { return loss_fn(model->forward(b.inputs), b.targets); },
//                            optimizer);
//   for (auto& batch : loader) double loss = guard.step(batch);
#pragma once
#include <cstdint>
#include <functional>

#include <torch/optim/optimizer.h>

#include "saturate/step/workload.h"
#include "saturate/train/micro_batch_memory.h"

namespace saturate {

class OomGuard {
 public:
  /// `loss(batch)`: the mean loss of the (micro-)batch given. The optimizer is not owned.
  OomGuard(std::function<torch::Tensor(const Batch&)> loss, torch::optim::Optimizer& optimizer);
  /// One optimizer step on `batch` (rows on dim 0; token batches [rows, length]); returns its
  /// mean loss. RuntimeFailure when a micro-batch of one row does not fit; other errors pass.
  double step(const Batch& batch);
  /// Called after each recovery (logging); may be empty.
  std::function<void(const MicroBatchMemory::Backoff&)> on_backoff;
  const MicroBatchMemory& memory() const { return memory_; }
  /// What the guard remembers; a caller may seed it (e.g. with what an earlier run learned).
  MicroBatchMemory& memory() { return memory_; }
  int64_t last_micro_batch() const { return last_micro_; }

 private:
  double run(const Batch& batch, int64_t micro);
  std::function<torch::Tensor(const Batch&)> loss_;
  torch::optim::Optimizer& optimizer_;
  MicroBatchMemory memory_;
  int64_t last_micro_ = 0;
};

}  // namespace saturate

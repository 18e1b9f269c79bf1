// Implements: what a training run reads: global batches as a pure function of the step index
// (TrainData: a resumed run sees the same data), evaluation batches (EvalData), and in-memory
// tensors as both. The formats (token windows, text documents, a loader's batches in pieces) are
// beside it in data/; the trainer (train/trainer.h) reads them through these interfaces.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "saturate/step/workload.h"

namespace saturate {

/// Global batches as a pure function of the step index, so a resumed run sees the same data.
class TrainData {
 public:
  virtual ~TrainData() = default;
  virtual std::string name() const = 0;
  virtual int64_t steps_per_epoch() const = 0;
  /// The global batch of optimizer step `step` (0-based, across epochs), on the host. Called
  /// with consecutive steps, starting anywhere (resume).
  virtual Batch batch_for_step(int64_t step) = 0;
  /// How long the last batch_for_step waited for data.
  virtual double last_wait_ms() const { return 0; }
  /// The pieces each batch is loaded in (the accumulation), from the next batch_for_step on: an
  /// OOM back-off while a batch was joined asks for smaller ones. Data that is not joined from
  /// pieces ignores it.
  virtual void set_parts(int64_t parts) { (void)parts; }
  /// Unequal shares re-split during training (`shares` auto): from the next batch_for_step on,
  /// this rank's part of every global batch by `shares` (one per rank, the same sum as before).
  /// InternalError where the data has no shares.
  virtual void set_shares(const std::vector<int64_t>& shares);
};

/// Evaluation batches, in order, restarted for each evaluation.
class EvalData {
 public:
  virtual ~EvalData() = default;
  virtual void restart() = 0;
  virtual std::optional<Batch> next() = 0;
};

/// Slices of in-memory tensors, in order, wrapping around each epoch.
class TensorTrainData final : public TrainData {
 public:
  TensorTrainData(torch::Tensor inputs, torch::Tensor targets, int64_t global_batch, std::string name = "tensors");
  std::string name() const override { return name_; }
  int64_t steps_per_epoch() const override { return inputs_.size(0) / global_batch_; }
  Batch batch_for_step(int64_t step) override;

 private:
  torch::Tensor inputs_, targets_;
  int64_t global_batch_;
  std::string name_;
};

}  // namespace saturate

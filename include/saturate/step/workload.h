// Implements: a trainable configuration: a model on a device, its loss (cross-entropy), its
// optimizer (sgd | adam | adamw) and synthetic batches of the right shape and type.
#pragma once
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "saturate/models/zoo.h"

namespace saturate {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
std::string to_string(OptimizerKind k);
/// "sgd" | "adam" | "adamw"; throws UsageError otherwise.
OptimizerKind parse_optimizer(const std::string& text);

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class Workload {
 public:
  /// Moves the model to `device`. `lr` 0 picks the optimizer's usual default.
  Workload(BuiltModel model, const torch::Device& device, OptimizerKind optimizer, double lr = 0, uint64_t seed = 0);

  Model& model() { return *built_.model; }
  /// Replaces the model by what `wrap` makes of it (DataParallel wraps it in replicas).
  void wrap_model(const std::function<std::unique_ptr<Model>(std::unique_ptr<Model>)>& wrap) {
    built_.model = wrap(std::move(built_.model));
  }
  const BuiltModel& built() const { return built_; }
  /// The shape of one sample of synthetic_batch/empty_batch (e.g. a shorter sequence: the
  /// longest document of the data, which a search then sizes for).
  void set_sample_shape(std::vector<int64_t> shape) { built_.sample_shape = std::move(shape); }
  const torch::Device& device() const { return device_; }
  OptimizerKind optimizer_kind() const { return optimizer_; }
  /// The learning rate the optimizer is made with (the default when none was given).
  double learning_rate() const { return lr_; }

  /// Random inputs and labels for `batch` samples, made on the device.
  Batch synthetic_batch(int64_t batch) const;
  /// The same, made on `where` (the host, for batches a loader would hold there).
  Batch synthetic_batch(int64_t batch, const torch::Device& where) const;
  /// Uninitialised inputs and labels of `batch` samples on `where`: the memory a loaded batch takes.
  Batch empty_batch(int64_t batch, const torch::Device& where) const;
  /// The loss of a batch: the one set_loss gave, else mean cross-entropy (logits [B, C] against
  /// labels [B], or [B, T, V] against [B, T]).
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) const;
  /// The output's loss against the targets, a scalar averaged over the batch's samples (the
  /// trainer weights micro-batches by their share of the global batch).
  using LossFn = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& targets)>;
  /// A user's own loss for every step, evaluation and trial (empty: cross-entropy again).
  void set_loss(LossFn loss) { loss_ = std::move(loss); }
  /// A fresh optimizer over the model's trainable parameters (its state is made lazily);
  /// `fused`: the same optimizer with a fused update kernel (step/fused_optimizer.h).
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(bool fused = false);
  /// Bytes of the trainable parameters.
  int64_t parameter_bytes();

 private:
  BuiltModel built_;
  torch::Device device_;
  OptimizerKind optimizer_;
  double lr_;
  uint64_t seed_;
  LossFn loss_;
};

}  // namespace saturate

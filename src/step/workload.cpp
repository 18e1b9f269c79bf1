#include "saturate/step/workload.h"

#include "saturate/step/fused_optimizer.h"

#include <fmt/format.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {

std::string to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
  }
  return "sgd";
}

OptimizerKind parse_optimizer(const std::string& text) {
  if (text == "sgd") return OptimizerKind::kSgd;
  if (text == "adam") return OptimizerKind::kAdam;
  if (text == "adamw") return OptimizerKind::kAdamW;
  throw UsageError("optimizer", fmt::format("unknown value '{}' (expected sgd, adam or adamw)", text));
}

Workload::Workload(BuiltModel model, const torch::Device& device, OptimizerKind optimizer, double lr, uint64_t seed)
    : built_(std::move(model)), device_(device), optimizer_(optimizer), lr_(lr), seed_(seed) {
  if (lr_ <= 0) lr_ = optimizer_ == OptimizerKind::kSgd ? 0.01 : 1e-3;
  built_.model->to(device_);
  built_.model->train(true);
}

Batch Workload::synthetic_batch(int64_t batch) const { return synthetic_batch(batch, device_); }

Batch Workload::empty_batch(int64_t batch, const torch::Device& where) const {
  const auto on = torch::TensorOptions().device(where);
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), built_.sample_shape.begin(), built_.sample_shape.end());
  if (built_.input_kind == InputKind::kTokens)
    return {torch::empty(shape, on.dtype(torch::kLong)), torch::empty(shape, on.dtype(torch::kLong))};
  return {torch::empty(shape, on.dtype(torch::kFloat)), torch::empty({batch}, on.dtype(torch::kLong))};
}

Batch Workload::synthetic_batch(int64_t batch, const torch::Device& where) const {
  torch::manual_seed(seed_ + static_cast<uint64_t>(batch));
  const auto on = torch::TensorOptions().device(where);
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), built_.sample_shape.begin(), built_.sample_shape.end());
  Batch b;
  if (built_.input_kind == InputKind::kTokens) {
    b.inputs = torch::randint(built_.classes, shape, on.dtype(torch::kLong));
    b.targets = torch::randint(built_.classes, shape, on.dtype(torch::kLong));
  } else {
    b.inputs = torch::randn(shape, on.dtype(torch::kFloat));
    b.targets = torch::randint(built_.classes, {batch}, on.dtype(torch::kLong));
  }
  return b;
}

torch::Tensor Workload::loss(const torch::Tensor& logits, const torch::Tensor& targets) const {
  if (loss_) return loss_(logits, targets);
  namespace F = torch::nn::functional;
  if (logits.dim() == targets.dim() + 1 && logits.size(-1) >= 1) {
    if (logits.dim() == 2) return F::cross_entropy(logits, targets);
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  throw UsageError(fmt::format("the model returned shape {} for labels of shape {}; saturate trains classifiers "
                               "returning [batch, classes] (or [batch, tokens, vocab] for token models)",
                               format_shape(logits.sizes().vec()), format_shape(targets.sizes().vec())));
}

std::unique_ptr<torch::optim::Optimizer> Workload::make_optimizer(bool fused) {
  std::vector<torch::Tensor> params;
  for (auto& p : built_.model->parameters())
    if (p.requires_grad()) params.push_back(p);
  if (fused) {
    switch (optimizer_) {
      case OptimizerKind::kSgd:
        return std::make_unique<FusedSGD>(params, torch::optim::SGDOptions(lr_).momentum(0.9));
      case OptimizerKind::kAdam:
        return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(lr_));
      case OptimizerKind::kAdamW:
        return std::make_unique<FusedAdamW>(params, torch::optim::AdamWOptions(lr_).weight_decay(0.01));
    }
  }
  switch (optimizer_) {
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr_).momentum(0.9));
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr_));
    case OptimizerKind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr_).weight_decay(0.01));
  }
  return nullptr;
}

int64_t Workload::parameter_bytes() {
  int64_t bytes = 0;
  for (auto& p : built_.model->parameters())
    if (p.requires_grad()) bytes += p.numel() * static_cast<int64_t>(p.element_size());
  return bytes;
}

}  // namespace saturate

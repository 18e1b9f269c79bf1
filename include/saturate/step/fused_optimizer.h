// Implements: the fused optimizer step (seed B7): SGD, Adam and AdamW whose update of every
// parameter runs as one fused kernel per step (at::_fused_sgd_ / _fused_adam_ / _fused_adamw_,
// the kernels behind torch.optim's fused=True, on CUDA and CPU) instead of a dozen operators per
// parameter. They are LibTorch's optimizers otherwise: same options, same state (so checkpoints
// written by one load into the other), same arithmetic (tested against them).
#pragma once
#include <memory>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace saturate {

class FusedSGD final : public torch::optim::SGD {
 public:
  using SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdam final : public torch::optim::Adam {
 public:
  using Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW final : public torch::optim::AdamW {
 public:
  using AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace saturate

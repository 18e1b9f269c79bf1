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

/// What a CUDA graph of the whole step needs from its optimizer (step/graphed_step.h): in
/// capturable mode the step count and the learning rate live in tensors on the parameters'
/// device, so that a replayed graph reads the current learning rate and advances the count.
class CapturableOptimizer {
 public:
  virtual ~CapturableOptimizer() = default;
  /// Keep the step count and learning rate in device tensors (set before the first step).
  void set_capturable(bool on) { capturable_ = on; }
  bool capturable() const { return capturable_; }
  /// While a graph captures the step: step() must not write the learning-rate tensors (a host
  /// value written during capture would be replayed forever); refresh_lr() does, before replays.
  void set_capturing(bool on) { capturing_ = on; }
  bool capturing() const { return capturing_; }
  /// Writes each group's learning rate into its tensor.
  virtual void refresh_lr() = 0;
  /// Copies the device step counts into the state a checkpoint holds (a read: a sync).
  virtual void sync_host_state() = 0;

 protected:
  bool capturable_ = false;
  bool capturing_ = false;
  std::vector<torch::Tensor> lr_;     ///< per parameter group
  std::vector<torch::Tensor> steps_;  ///< per parameter group (Adam, AdamW), float
};

class FusedSGD final : public torch::optim::SGD, public CapturableOptimizer {
 public:
  using SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void refresh_lr() override;
  void sync_host_state() override {}
};

class FusedAdam final : public torch::optim::Adam, public CapturableOptimizer {
 public:
  using Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void refresh_lr() override;
  void sync_host_state() override;
};

class FusedAdamW final : public torch::optim::AdamW, public CapturableOptimizer {
 public:
  using AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void refresh_lr() override;
  void sync_host_state() override;
};

}  // namespace saturate

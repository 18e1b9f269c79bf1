// Implements: dynamic loss scaling for fp16, as torch.cuda.amp.GradScaler does it. The loss is
// multiplied by the scale before backward; before the optimizer step the gradients are
// unscaled in place (so clipping sees true values) and checked for inf/NaN; a step with
// non-finite gradients is skipped and the scale backs off; after `growth_interval` clean steps
// it grows. Built on ATen's _amp_foreach_non_finite_check_and_unscale_ / _amp_update_scale_.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/types.h>

namespace saturate {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  ///< disabled: every call is a pass-through (fp32/bf16 need no scaling)
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  /// loss * scale (the loss itself when disabled).
  torch::Tensor scale(const torch::Tensor& loss);
  /// Divides the gradients by the scale and records whether any is inf/NaN. Idempotent per step.
  void unscale(torch::optim::Optimizer& optimizer);
  /// Unscales if needed; runs optimizer.step() unless a gradient was non-finite. Returns
  /// whether the step ran.
  bool step(torch::optim::Optimizer& optimizer);
  /// Grows or backs off the scale from what this step found; starts the next step.
  void update();

  double scale_value() const;
  int64_t growth_tracker() const;
  bool enabled() const { return options_.enabled; }
  /// For checkpoints: {scale, growth tracker} and back.
  std::vector<torch::Tensor> state() const;
  void load_state(const std::vector<torch::Tensor>& state);

 private:
  void make_state();
  GradScalerOptions options_;
  torch::Tensor scale_;  // undefined while disabled           // [1] float32
  torch::Tensor growth_tracker_;  // [1] int32
  torch::Tensor found_inf_;       // [1] float32
  bool unscaled_ = false;
};

}  // namespace saturate

#include "saturate/step/grad_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

namespace saturate {

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  // a disabled scaler (fp32, bf16) allocates nothing: a step measures exactly what it holds
  if (options_.enabled) make_state();
}

void GradScaler::make_state() {
  scale_ = torch::full({1}, options_.init_scale, torch::kFloat);
  growth_tracker_ = torch::zeros({1}, torch::kInt);
  found_inf_ = torch::zeros({1}, torch::kFloat);
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (!options_.enabled) return loss;
  if (scale_.device() != loss.device()) {
    scale_ = scale_.to(loss.device());
    growth_tracker_ = growth_tracker_.to(loss.device());
    found_inf_ = found_inf_.to(loss.device());
  }
  return loss * scale_.to(loss.scalar_type());
}

void GradScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled || unscaled_) return;
  found_inf_.zero_();
  const torch::Tensor inv_scale = scale_.reciprocal();
  std::vector<torch::Tensor> grads;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) grads.push_back(p.mutable_grad());
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  unscaled_ = true;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  unscale(optimizer);
  if (found_inf_.item<float>() != 0.0f) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  unscaled_ = false;
}

double GradScaler::scale_value() const { return options_.enabled ? scale_.item<double>() : 1.0; }
int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : 0;
}

std::vector<torch::Tensor> GradScaler::state() const {
  if (!scale_.defined()) return {torch::full({1}, options_.init_scale, torch::kFloat), torch::zeros({1}, torch::kInt)};
  return {scale_.cpu(), growth_tracker_.cpu()};
}

void GradScaler::load_state(const std::vector<torch::Tensor>& state) {
  if (!scale_.defined()) make_state();
  scale_.copy_(state.at(0));
  growth_tracker_.copy_(state.at(1));
}

}  // namespace saturate

#include "saturate/step/gradient_noise.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/step/training_step.h"

namespace saturate {

GradientNoiseScale::GradientNoiseScale(double decay) : decay_(decay) {
  if (!(decay >= 0 && decay < 1))
    throw UsageError("noise_decay", fmt::format("{} is outside [0, 1); 0.95 averages over about the last 20 steps", decay));
}

void GradientNoiseScale::add(int64_t small_batch, double small_sq_norm, int64_t big_batch, double big_sq_norm) {
  if (small_batch <= 0 || big_batch <= small_batch)
    throw UsageError("noise_scale", fmt::format("batches {} and {}: the noise scale needs 0 < small < big", small_batch,
                                                big_batch));
  if (!std::isfinite(small_sq_norm) || !std::isfinite(big_sq_norm)) return;
  const double b = static_cast<double>(small_batch), B = static_cast<double>(big_batch);
  const double g2 = (B * big_sq_norm - b * small_sq_norm) / (B - b);
  const double trace = (small_sq_norm - big_sq_norm) / (1.0 / b - 1.0 / B);
  g2_ = decay_ * g2_ + (1 - decay_) * g2;
  trace_ = decay_ * trace_ + (1 - decay_) * trace;
  ++count_;
}

namespace {
double corrected(double ema, double decay, int64_t count) {
  if (count == 0) return 0;
  return ema / (1 - std::pow(decay, static_cast<double>(count)));
}
}  // namespace

double GradientNoiseScale::gradient_sq_norm() const { return corrected(g2_, decay_, count_); }
double GradientNoiseScale::trace_covariance() const { return corrected(trace_, decay_, count_); }

std::optional<double> GradientNoiseScale::noise_scale() const {
  if (count_ == 0 || !(g2_ > 0)) return std::nullopt;
  return std::max(0.0, trace_ / g2_);  // the same bias correction cancels in the ratio
}

std::vector<double> GradientNoiseScale::state() const { return {decay_, static_cast<double>(count_), g2_, trace_}; }

void GradientNoiseScale::load_state(const std::vector<double>& state) {
  if (state.size() != 4 || !(state[0] >= 0 && state[0] < 1) || state[1] < 0)
    throw UsageError("noise_scale", fmt::format("a saved noise-scale state of {} values is not one this version wrote",
                                                state.size()));
  decay_ = state[0];
  count_ = static_cast<int64_t>(state[1]);
  g2_ = state[2];
  trace_ = state[3];
}

double gradient_sq_norm(const std::vector<torch::Tensor>& parameters, double scale) {
  torch::NoGradGuard no_grad;
  torch::Tensor sum;
  for (const auto& p : parameters) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    const torch::Tensor sq = g.to(torch::kFloat).pow(2).sum().to(torch::kDouble);
    sum = sum.defined() ? sum + sq.to(sum.device()) : sq;
  }
  if (!sum.defined()) return 0;
  return sum.item<double>() / (scale * scale);
}

namespace {

NoiseScaleMeasurement measurement_of(const GradientNoiseScale& noise, int64_t batch, int64_t micro_batch) {
  NoiseScaleMeasurement m;
  m.noise_scale = noise.noise_scale();
  m.gradient_sq_norm = noise.gradient_sq_norm();
  m.trace_covariance = noise.trace_covariance();
  m.steps = noise.measurements();
  m.batch = batch;
  m.micro_batch = micro_batch;
  return m;
}

}  // namespace

NoiseScaleMeasurement measure_noise_scale(Workload& workload, const StepOptions& step,
                                          const std::function<Batch(int64_t)>& next_batch, int64_t batch,
                                          int64_t micro_batch, int steps, double decay) {
  if (batch < 2)
    throw UsageError("noise_batch", fmt::format("{}: the noise scale compares two batch sizes within one batch; give "
                                                "at least 2 samples",
                                                batch));
  if (micro_batch < 0 || micro_batch >= batch)
    throw UsageError("noise_micro_batch", fmt::format("{} must be in 1..{} (smaller than the batch; 0: half of it)",
                                                      micro_batch, batch - 1));
  if (steps < 1) throw UsageError("noise_steps", fmt::format("{} is not a positive number of steps", steps));
  GradientNoiseScale noise(decay);
  StepOptions so = step;
  so.micro_batch = micro_batch > 0 ? micro_batch : (batch + 1) / 2;
  so.noise = &noise;
  so.observer = nullptr;
  so.retain_graph = false;
  so.fast_paths.cuda_graphs = false;
  Model& model = workload.model();
  std::vector<torch::Tensor> saved;
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : model.named_tensors()) saved.push_back(t.detach().clone());
  }
  const auto restore = [&] {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& [name, t] : model.named_tensors()) t.copy_(saved[i++]);
  };
  {
    TrainingStep training(workload, so);
    for (auto& group : training.optimizer().param_groups()) group.options().set_lr(0);
    try {
      for (int s = 0; s < steps; ++s) (void)training.run(next_batch(batch));
    } catch (...) {
      training.release_gradients();
      restore();
      throw;
    }
    training.release_gradients();
  }
  restore();
  return measurement_of(noise, batch, so.micro_batch);
}

NoiseScaleMeasurement measure_noise_scale(const std::function<GradientNormPair(int64_t batch)>& measure,
                                          int64_t batch, int steps, double decay) {
  if (batch < 2)
    throw UsageError("noise_batch", fmt::format("{}: the noise scale compares two batch sizes; give at least 2 samples",
                                                batch));
  if (steps < 1) throw UsageError("noise_steps", fmt::format("{} is not a positive number of steps", steps));
  GradientNoiseScale noise(decay > 0 ? decay : 1.0 - 1.0 / std::max(steps, 2));
  int64_t small = 0;
  for (int s = 0; s < steps; ++s) {
    const GradientNormPair g = measure(batch);
    noise.add(g.small_batch, g.small_sq_norm, g.big_batch, g.big_sq_norm);
    small = g.small_batch;
  }
  return measurement_of(noise, batch, small);
}

}  // namespace saturate

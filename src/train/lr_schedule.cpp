#include "saturate/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::string to_string(LrDecay d) {
  switch (d) {
    case LrDecay::kConstant: return "constant";
    case LrDecay::kCosine: return "cosine";
    case LrDecay::kStep: return "step";
  }
  return "constant";
}

LrDecay parse_lr_decay(const std::string& text) {
  if (text == "constant") return LrDecay::kConstant;
  if (text == "cosine") return LrDecay::kCosine;
  if (text == "step") return LrDecay::kStep;
  throw UsageError("lr_schedule", fmt::format("unknown value '{}' (expected constant, cosine or step)", text));
}

std::string to_string(LrScaling s) {
  switch (s) {
    case LrScaling::kNone: return "none";
    case LrScaling::kLinear: return "linear";
    case LrScaling::kSqrt: return "sqrt";
  }
  return "none";
}

LrScaling parse_lr_scaling(const std::string& text) {
  if (text == "none") return LrScaling::kNone;
  if (text == "linear") return LrScaling::kLinear;
  if (text == "sqrt") return LrScaling::kSqrt;
  throw UsageError("lr_scaling", fmt::format("unknown value '{}' (expected linear, sqrt or none)", text));
}

double scale_learning_rate(double base_lr, int64_t global_batch, int64_t base_batch, LrScaling scaling) {
  if (scaling == LrScaling::kNone || base_batch <= 0 || global_batch <= 0) return base_lr;
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch);
  return scaling == LrScaling::kLinear ? base_lr * ratio : base_lr * std::sqrt(ratio);
}

double LrSchedule::lr_at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps)
    return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t after = step - warmup_steps;
  switch (decay) {
    case LrDecay::kConstant: return peak_lr;
    case LrDecay::kStep: return peak_lr * std::pow(gamma, static_cast<double>(after / std::max<int64_t>(1, step_every)));
    case LrDecay::kCosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
      const double t = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(M_PI * t));
    }
  }
  return peak_lr;
}

}  // namespace saturate

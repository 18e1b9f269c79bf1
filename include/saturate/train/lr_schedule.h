// Implements: the learning rate over training: linear warm-up, then constant, cosine or step
// decay; and rescaling the base rate when the global batch differs from the one it was tuned
// for (seed B9: linear for SGD-like training, square root as the milder rule).
#pragma once
#include <cstdint>
#include <string>

namespace saturate {

enum class LrDecay { kConstant, kCosine, kStep };
std::string to_string(LrDecay d);
LrDecay parse_lr_decay(const std::string& text);  ///< constant | cosine | step

enum class LrScaling { kNone, kLinear, kSqrt };
std::string to_string(LrScaling s);
LrScaling parse_lr_scaling(const std::string& text);  ///< none | linear | sqrt

/// base_lr * (global/base) or * sqrt(global/base); unchanged for kNone or base_batch <= 0.
double scale_learning_rate(double base_lr, int64_t global_batch, int64_t base_batch, LrScaling scaling);

struct LrSchedule {
  double peak_lr = 1e-3;
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::kConstant;
  int64_t total_steps = 1;       ///< cosine decays to min_lr at this step
  double min_lr = 0;
  int64_t step_every = 1000;     ///< step decay: multiply by gamma every this many steps
  double gamma = 0.1;
  /// The rate for optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
};

}  // namespace saturate

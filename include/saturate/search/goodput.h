// Implements: which batch trains fastest, not only which runs fastest (seed B3, B9): Pollux's
// goodput (Qiao et al., OSDI '21) = throughput x statistical efficiency, where the efficiency of
// a batch M against the batch M0 the learning rate was tuned for is (φ + M0) / (φ + M), φ the
// gradient noise scale (step/gradient_noise.h): below φ a larger batch makes almost as much
// progress per sample, far above it each extra sample is mostly wasted. The learning rate follows
// AdaScale's gain (M/M0) x efficiency: linear scaling while M << φ, none once M >> φ.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "saturate/search/throughput_curve.h"

namespace saturate {

/// What `--objective` optimizes: memory (the largest batch under the target), throughput (the
/// knee of the measured samples/s curve) or goodput (samples/s x statistical efficiency).
enum class Objective { kMemory, kThroughput, kGoodput };
std::string to_string(Objective o);
/// "memory" | "throughput" | "goodput"; UsageError naming the flag otherwise.
Objective parse_objective(const std::string& text);

/// (φ + M0) / (φ + M): 1 at M0, below 1 above it; 1 for every batch while φ is unknown (the
/// gradient is all noise: a larger batch costs no progress per sample).
double statistical_efficiency(std::optional<double> noise_scale, int64_t base_batch, int64_t batch);
/// AdaScale's learning-rate gain (M / M0) x efficiency: between 1 and M / M0.
double adascale_gain(std::optional<double> noise_scale, int64_t base_batch, int64_t batch);

/// How the learning rate follows the batch: AdaScale's gain (SGD), or its square root for Adam
/// and AdamW (adaptive optimizers scale by the square root of the batch ratio; Malladi et al.
/// 2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms").
enum class LrRule { kAdaScale, kAdaScaleSqrt };
std::string to_string(LrRule r);  ///< "adascale" | "adascale-sqrt"
double lr_gain(LrRule rule, std::optional<double> noise_scale, int64_t base_batch, int64_t batch);

struct GoodputPoint {
  int64_t batch = 0;
  double samples_per_s = 0;
  double efficiency = 1;
  double goodput = 0;  ///< samples/s x efficiency: "useful samples" per second, in M0 units
};

struct GoodputChoice {
  int64_t batch = 0;  ///< 0 when no point of the curve ran
  double efficiency = 1;
  double lr_gain = 1;  ///< the rule's, at the chosen batch
  LrRule lr_rule = LrRule::kAdaScale;
  std::optional<double> noise_scale;
  int64_t base_batch = 0;
  std::vector<GoodputPoint> points;
  std::string reason;  ///< why this batch, in words
};

/// The curve's ok point with the highest goodput among those at or above the base batch (the
/// efficiency model holds from M0 up, as in Pollux; the largest point when all lie below it).
/// UsageError for base_batch <= 0.
GoodputChoice choose_goodput_batch(const ThroughputCurve& curve, std::optional<double> noise_scale, int64_t base_batch,
                                   LrRule rule = LrRule::kAdaScale);

}  // namespace saturate

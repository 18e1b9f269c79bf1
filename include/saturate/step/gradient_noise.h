// Implements: the gradient noise scale (McCandlish et al. 2018, "An Empirical Model of
// Large-Batch Training", appendix A): B_simple = tr(Σ) / |G|², where G is the true gradient and
// Σ the per-sample gradient covariance. Measured from the squared norms of gradients at two batch
// sizes taken in the same step — the step's first micro-batch (b, this rank's alone) and the whole
// step (B, all ranks) — with the unbiased estimators
//     |G|²  ≈ (B |G_B|² - b |G_b|²) / (B - b)
//     tr(Σ) ≈ (|G_b|² - |G_B|²) / (1/b - 1/B)
// each smoothed by its own bias-corrected exponential moving average over steps; the noise scale
// is the ratio of the two averages (the ratio of noisy estimates is biased, their averages are
// not). The measurement costs no memory: the first micro-batch's gradient is what the gradient
// buffers hold after its backward.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "saturate/step/workload.h"

namespace saturate {

struct StepOptions;  // training_step.h

class GradientNoiseScale {
 public:
  /// `decay`: weight the moving averages keep per measurement (0.95: about the last 20 steps).
  /// UsageError outside [0, 1).
  explicit GradientNoiseScale(double decay = 0.95);

  /// One step's two gradients: the squared norm of the mean gradient over `small_batch` samples
  /// and over `big_batch` samples (big_batch > small_batch > 0; UsageError otherwise). Non-finite
  /// norms (an fp16 step with overflowing gradients) are ignored.
  void add(int64_t small_batch, double small_sq_norm, int64_t big_batch, double big_sq_norm);

  int64_t measurements() const { return count_; }
  /// The smoothed estimates (0 before any measurement).
  double gradient_sq_norm() const;
  double trace_covariance() const;
  /// B_simple = tr(Σ)/|G|² in samples; nullopt before a measurement or while the smoothed |G|²
  /// is not positive (the gradient is still all noise: any batch is "small").
  std::optional<double> noise_scale() const;

  /// For checkpoints: {decay, count, ema |G|², ema tr(Σ)}; load_state takes what state() gave.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  double decay_;
  int64_t count_ = 0;
  double g2_ = 0, trace_ = 0;  // un-corrected moving averages
};

/// Squared L2 norm of all parameters' gradients (those defined), divided by `scale`² (an fp16
/// loss scale), as one number (one wait for the device).
double gradient_sq_norm(const std::vector<torch::Tensor>& parameters, double scale = 1.0);

struct NoiseScaleMeasurement {
  std::optional<double> noise_scale;  ///< B_simple in samples
  double gradient_sq_norm = 0;        ///< |G|², smoothed
  double trace_covariance = 0;        ///< tr(Σ), smoothed
  int64_t steps = 0;
  int64_t batch = 0;        ///< samples per measured step (the big batch)
  int64_t micro_batch = 0;  ///< samples in its first micro-batch (the small batch)
};

/// Measures the noise scale at the model's current weights: `steps` steps of `batch` samples from
/// `next_batch` (host or device tensors), each split into micro-batches of `micro_batch` (0: two
/// halves), run forward and backward as `step` configures them but with a learning rate of 0, and
/// the model's parameters and buffers (BatchNorm statistics) put back afterwards. The optimizer
/// is a fresh one, so nothing of a training run's state changes. `decay` as GradientNoiseScale's.
NoiseScaleMeasurement measure_noise_scale(Workload& workload, const StepOptions& step,
                                          const std::function<Batch(int64_t)>& next_batch, int64_t batch,
                                          int64_t micro_batch, int steps, double decay = 0.9);

/// One measurement's two squared gradient norms (GradientNoiseScale::add's arguments).
struct GradientNormPair {
  int64_t small_batch = 0;
  double small_sq_norm = 0;
  int64_t big_batch = 0;
  double big_sq_norm = 0;
};

/// The noise scale from `steps` calls of `measure(batch)`, which runs the caller's own step and
/// returns the squared norms of its gradients at a smaller batch and at `batch` (a user's step:
/// its gradient at half the batch and at the whole batch, each of fresh samples; independent
/// batches keep the estimators unbiased, at more variance than the halves of one batch).
/// `measure` leaves the weights as they were. `decay` as GradientNoiseScale's; 0: 1 - 1/steps, so
/// that every measurement of this one-off run counts about alike (independent batches vary more
/// than the halves of one batch, and a one-off measurement has no older weights to forget).
/// UsageError for a batch below 2 or no steps.
NoiseScaleMeasurement measure_noise_scale(const std::function<GradientNormPair(int64_t batch)>& measure,
                                          int64_t batch, int steps, double decay = 0);

}  // namespace saturate

// Implements: peak memory as a law of the batch size, peak(b) = fixed + per_sample * b, fitted
// from measured trials, optionally rounded up to the allocator's granularity.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace saturate {

struct MemoryLaw {
  double fixed_bytes = 0;
  double per_sample_bytes = 0;
  int64_t granularity_bytes = 0;  ///< predicted peaks are rounded up to a multiple of this
  bool valid = false;             ///< false when there were too few points or no growth

  /// Predicted peak at `batch`.
  double predict_bytes(int64_t batch) const;
  /// Largest batch whose predicted peak is <= budget (0 when even batch 1 is predicted not to fit;
  /// -1 when the law is not valid).
  int64_t max_batch_within(int64_t budget_bytes) const;
};

/// Least-squares line through (batch, peak bytes) points. Needs two distinct batches and growth.
MemoryLaw fit_memory_law(const std::vector<std::pair<int64_t, int64_t>>& points, int64_t granularity_bytes = 0);

/// The line through the two points with the largest batches: the local law near the boundary,
/// where a least-squares fit over small batches would be pulled by their fixed costs.
MemoryLaw secant_memory_law(std::vector<std::pair<int64_t, int64_t>> points, int64_t granularity_bytes = 0);

/// Near a limit: the line through the largest point at or under `limit_bytes` and the smallest
/// point over it (interpolation, regula falsi); the secant law when no point lies over it.
MemoryLaw local_memory_law(const std::vector<std::pair<int64_t, int64_t>>& points, int64_t limit_bytes,
                           int64_t granularity_bytes = 0);

}  // namespace saturate

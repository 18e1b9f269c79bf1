#include "saturate/search/memory_law.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace saturate {

double MemoryLaw::predict_bytes(int64_t batch) const {
  double bytes = fixed_bytes + per_sample_bytes * static_cast<double>(batch);
  if (granularity_bytes > 0) {
    const double g = static_cast<double>(granularity_bytes);
    bytes = std::ceil(bytes / g) * g;
  }
  return bytes;
}

int64_t MemoryLaw::max_batch_within(int64_t budget_bytes) const {
  if (!valid || per_sample_bytes <= 0) return -1;
  double room = static_cast<double>(budget_bytes) - fixed_bytes;
  if (room < per_sample_bytes) return 0;
  double b = std::floor(room / per_sample_bytes);
  if (b > 1e15) b = 1e15;
  auto batch = static_cast<int64_t>(b);
  // rounding can only raise the prediction: step down until it fits (a few steps at most).
  while (batch > 0 && predict_bytes(batch) > static_cast<double>(budget_bytes)) {
    const double over = predict_bytes(batch) - static_cast<double>(budget_bytes);
    batch -= std::max<int64_t>(1, static_cast<int64_t>(over / per_sample_bytes));
  }
  return std::max<int64_t>(batch, 0);
}

MemoryLaw fit_memory_law(const std::vector<std::pair<int64_t, int64_t>>& points, int64_t granularity_bytes) {
  MemoryLaw law;
  law.granularity_bytes = granularity_bytes;
  if (points.size() < 2) return law;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [b, bytes] : points) {
    const double x = static_cast<double>(b), y = static_cast<double>(bytes);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double denom = n * sxx - sx * sx;
  if (std::fabs(denom) < 1e-9) return law;
  law.per_sample_bytes = (n * sxy - sx * sy) / denom;
  law.fixed_bytes = (sy - law.per_sample_bytes * sx) / n;
  law.valid = law.per_sample_bytes > 0;
  return law;
}

MemoryLaw secant_memory_law(std::vector<std::pair<int64_t, int64_t>> points, int64_t granularity_bytes) {
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               points.end());
  if (points.size() < 2) return fit_memory_law(points, granularity_bytes);
  // the largest point and the one below it when they are at least 5 % apart: the local slope,
  // which matters when memory curves; else the largest one at most 3/4 of the top batch, a
  // baseline long enough that rounding steps and noise barely tilt the slope (tiny batches sit
  // on fixed costs: optimizer temporaries, workspaces).
  const auto top = points.back();
  auto partner = points.front();
  const auto& below = points[points.size() - 2];
  if (below.first * 20 <= top.first * 19 && (granularity_bytes == 0 || top.second - below.second >= 4 * granularity_bytes)) {
    partner = below;
  } else {
    for (const auto& p : points)
      if (p.first * 4 <= top.first * 3) partner = p;
  }
  return fit_memory_law({partner, top}, granularity_bytes);
}

MemoryLaw local_memory_law(const std::vector<std::pair<int64_t, int64_t>>& points, int64_t limit_bytes,
                           int64_t granularity_bytes) {
  const std::pair<int64_t, int64_t>* under = nullptr;
  const std::pair<int64_t, int64_t>* over = nullptr;
  for (const auto& p : points) {
    if (p.second <= limit_bytes) {
      if (!under || p.first > under->first) under = &p;
    } else if (!over || p.first < over->first) {
      over = &p;
    }
  }
  if (under && over && over->first > under->first) return fit_memory_law({*under, *over}, granularity_bytes);
  return secant_memory_law(points, granularity_bytes);
}

}  // namespace saturate

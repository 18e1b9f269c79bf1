// Implements: the small statistics several parts share (one definition each): the median of
// timings, which a step preempted by other load on the machine moves less than a mean.
#pragma once
#include <algorithm>
#include <vector>

namespace saturate {

/// The median of `values` (the mean of the two middle ones for an even count); 0 when empty.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace saturate

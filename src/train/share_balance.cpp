#include "saturate/train/share_balance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "saturate/data/batch_plan.h"

namespace saturate {

ShareBalance balance_shares(const std::vector<int64_t>& shares, const std::vector<double>& busy_ms, double min_gain) {
  ShareBalance b;
  b.shares = shares;
  b.busy_ms = busy_ms;
  b.proposed = shares;
  if (shares.size() < 2 || busy_ms.size() != shares.size()) return b;
  for (size_t r = 0; r < shares.size(); ++r) {
    if (!(busy_ms[r] > 0) || !std::isfinite(busy_ms[r]) || shares[r] < 1) {
      b.samples_per_s.clear();
      return b;
    }
    b.samples_per_s.push_back(static_cast<double>(shares[r]) * 1e3 / busy_ms[r]);
  }
  const int64_t global = std::accumulate(shares.begin(), shares.end(), int64_t{0});
  b.proposed = shares_by_speed(global, b.samples_per_s);
  b.slowest_busy_ms = *std::max_element(busy_ms.begin(), busy_ms.end());
  for (size_t r = 0; r < shares.size(); ++r)
    b.predicted_slowest_ms =
        std::max(b.predicted_slowest_ms, static_cast<double>(b.proposed[r]) * 1e3 / b.samples_per_s[r]);
  b.gain = b.predicted_slowest_ms > 0 ? b.slowest_busy_ms / b.predicted_slowest_ms : 1.0;
  // min_gain 1: whenever the split by speed differs (its rounding to whole samples may predict a
  // hair slower than the exact split, which never is)
  b.resplit = b.proposed != shares && (b.gain >= min_gain || min_gain <= 1.0);
  return b;
}

std::string share_change_text(const ShareBalance& b) {
  std::vector<std::string> busy;
  for (double ms : b.busy_ms) busy.push_back(fmt::format("{:.1f}", ms));
  return fmt::format("step {}: shares {} -> {} (busy {} ms a step; predicted {:.2f}x)", b.step, fmt::join(b.shares, ","),
                     fmt::join(b.proposed, ","), fmt::join(busy, " / "), b.gain);
}

}  // namespace saturate

#include "saturate/search/config_choice.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

ConfigChoice choose_config(const std::vector<SearchResult>& results, const std::vector<std::string>& names,
                           int64_t required_batch, double tolerance) {
  if (results.empty() || results.size() != names.size())
    throw UsageError("configs", fmt::format("{} results for {} names; give one search per configuration, at least one",
                                            results.size(), names.size()));
  ConfigChoice c;
  for (const SearchResult& r : results) c.best.push_back(best_usable_batch(r));
  const auto fits = [&](size_t i) { return required_batch <= 0 || results[i].max_batch >= required_batch; };
  std::vector<size_t> candidates;
  for (size_t i = 0; i < results.size(); ++i)
    if (fits(i)) candidates.push_back(i);
  if (candidates.empty()) {
    c.chosen = 0;
    c.reason = fmt::format("no configuration fits the required batch {} (the largest max_batch is {}); keeping {}",
                           required_batch, [&] {
                             int64_t m = 0;
                             for (const SearchResult& r : results) m = std::max(m, r.max_batch);
                             return m;
                           }(),
                           names[0]);
    return c;
  }
  // the first candidate is the reference; a later one wins only beyond the tolerance
  size_t chosen = candidates.front();
  for (size_t i : candidates)
    if (c.best[i].samples_per_s > c.best[chosen].samples_per_s * (1 + tolerance)) chosen = i;
  c.chosen = chosen;
  const BestBatch& b = c.best[chosen];
  if (chosen != 0 && !fits(0)) {
    c.reason = fmt::format("the required batch {} only fits with {} (max_batch {}; {} reaches {}); {:.1f} samples/s "
                           "at batch {}",
                           required_batch, names[chosen], results[chosen].max_batch, names[0], results[0].max_batch,
                           b.samples_per_s, b.batch);
  } else if (chosen != 0) {
    c.reason = fmt::format("{} runs {:.1f} samples/s at batch {}, {:+.1f} % against {}'s {:.1f} at batch {}",
                           names[chosen], b.samples_per_s, b.batch,
                           100 * (b.samples_per_s / c.best[0].samples_per_s - 1), names[0],
                           c.best[0].samples_per_s, c.best[0].batch);
  } else {
    c.reason = fmt::format("{} is the fastest within {:.0f} % ({:.1f} samples/s at batch {}); the others do not win "
                           "by more",
                           names[0], 100 * tolerance, b.samples_per_s, b.batch);
  }
  return c;
}

}  // namespace saturate

#include "saturate/data/token_budget.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/data/sampler.h"

namespace saturate {

void TokenBudgetOptions::check() const {
  if (max_tokens < 1)
    throw UsageError("max_tokens", fmt::format("{} is not a positive number of tokens; give the padded tokens a batch "
                                               "may hold (the search's max_tokens)",
                                               max_tokens));
  if (max_items < 0)
    throw UsageError("max_items", fmt::format("{} is negative; give 0 (no limit) or a positive count", max_items));
}

std::vector<std::vector<int64_t>> token_budget_batches(const std::vector<int64_t>& lengths,
                                                       const TokenBudgetOptions& o, int64_t epoch) {
  o.check();
  const int64_t n = static_cast<int64_t>(lengths.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lengths[static_cast<size_t>(i)];
    if (len < 1)
      throw UsageError("lengths", fmt::format("item {} has length {}; every item needs at least one token", i, len));
    if (len > o.max_tokens)
      throw UsageError("max_tokens", fmt::format("{} is below item {}'s length {}: no batch can hold it; give "
                                                 "max_tokens {} or more, or truncate the item",
                                                 o.max_tokens, i, len, len));
  }
  // ties in length broken by the epoch's permutation: batches differ from epoch to epoch
  std::vector<int64_t> order = epoch_order(n, o.seed, epoch, ShardOptions{});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  int64_t longest = 0;  // sorted longest first: the batch's first item is its longest
  for (const int64_t item : order) {
    const int64_t len = lengths[static_cast<size_t>(item)];
    const int64_t widest = std::max(longest, len);
    const int64_t count = static_cast<int64_t>(current.size()) + 1;
    if (!current.empty() && (count * widest > o.max_tokens || (o.max_items > 0 && count > o.max_items))) {
      batches.push_back(std::move(current));
      current.clear();
      longest = 0;
    }
    current.push_back(item);
    longest = std::max(longest, len);
  }
  if (!current.empty()) batches.push_back(std::move(current));
  if (o.shuffle) {
    const std::vector<int64_t> visit = epoch_order(static_cast<int64_t>(batches.size()), o.seed ^ 0x5bd1e995ull,
                                                   epoch, ShardOptions{});
    std::vector<std::vector<int64_t>> shuffled;
    shuffled.reserve(batches.size());
    for (const int64_t b : visit) shuffled.push_back(std::move(batches[static_cast<size_t>(b)]));
    batches = std::move(shuffled);
  }
  return batches;
}

BatchTokens batch_tokens(const std::vector<int64_t>& lengths, const std::vector<int64_t>& items) {
  BatchTokens t;
  int64_t longest = 0;
  for (const int64_t i : items) {
    const int64_t len = lengths.at(static_cast<size_t>(i));
    longest = std::max(longest, len);
    t.real += len;
  }
  t.padded = longest * static_cast<int64_t>(items.size());
  return t;
}

}  // namespace saturate

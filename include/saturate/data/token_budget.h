// Implements: batches that fill a token budget instead of a fixed count (fairseq's
// `--max-tokens`, Hugging Face's `group_by_length`; issue #26). With a fixed batch, every batch
// must be small enough for the longest items; padded to its longest, a batch of short items then
// leaves most of the device idle. Here the epoch's items are sorted by length (ties broken by a
// permutation drawn from the seed and the epoch), cut greedily into batches whose padded size
// (items x longest) stays within `max_tokens`, and the batches are visited in an order drawn
// from (seed, epoch): similar lengths share a batch, every item is visited once an epoch, and a
// batch never costs more than the budget the search answered. The loss of such batches is
// normalised per token (not per item) so that the gradient does not depend on the grouping.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saturate {

struct TokenBudgetOptions {
  /// Padded tokens per batch (items x the batch's longest); required (> 0).
  int64_t max_tokens = 0;
  /// At most this many items per batch (0: no limit).
  int64_t max_items = 0;
  /// Visit the batches in a fresh order each epoch (false: longest batches first).
  bool shuffle = true;
  uint64_t seed = 0;
  /// UsageError naming the option when out of range.
  void check() const;
};

/// The epoch's batches: lists of item indices (into `lengths`), every item exactly once.
/// UsageError when an item alone is longer than `max_tokens` (naming it and its length).
std::vector<std::vector<int64_t>> token_budget_batches(const std::vector<int64_t>& lengths,
                                                       const TokenBudgetOptions& options, int64_t epoch);

/// Padded tokens of a batch (items x longest) and its real tokens, for reports and tests.
struct BatchTokens {
  int64_t padded = 0;
  int64_t real = 0;
};
BatchTokens batch_tokens(const std::vector<int64_t>& lengths, const std::vector<int64_t>& items);

}  // namespace saturate

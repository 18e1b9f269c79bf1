// Implements: worst-case batches (seed M4, issue #26). A search that measures the first batches
// of a shuffled loader answers for those batches; variable-length data (sequence lengths above
// all) later brings a batch several times longer, and the answer runs out of memory mid-epoch.
// Given each item's cost (its length; its pixels for variable-size images), read once, the
// costliest batch of b items is the b costliest items: padded to its longest, no batch of b
// items the loader can draw is larger (every padded batch of b is at most b x the longest
// item), and unpadded, none holds more elements. A search run on these batches answers for
// every batch of the epoch. The median batch (b items around the median cost) is what a
// typical batch looks like: its answer, beside the worst case, shows what the tail costs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saturate {

class WorstCaseOrder {
 public:
  /// `sizes[i]`: item i's cost (tokens, pixels; >= 1). UsageError naming `option` when empty or
  /// an item's size is below 1.
  explicit WorstCaseOrder(std::vector<int64_t> sizes, const std::string& option = "data");

  int64_t items() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t size_of(int64_t item) const { return sizes_.at(static_cast<size_t>(item)); }
  /// Item indices, costliest first (ties: the lower index first, so the order is reproducible).
  const std::vector<int64_t>& order() const { return order_; }
  int64_t largest_size() const;
  int64_t median_size() const;
  /// The costliest batch of `batch` items: the `batch` costliest (with fewer items than `batch`,
  /// the order repeats from the costliest: a batch can only hold items the data has).
  std::vector<int64_t> worst_items(int64_t batch) const;
  /// `batch` items around the median cost: a typical batch, for comparison.
  std::vector<int64_t> median_items(int64_t batch) const;
  /// Elements of the worst batch padded to its longest: batch x largest_size().
  int64_t padded_worst_tokens(int64_t batch) const { return batch * largest_size(); }

 private:
  std::vector<int64_t> sizes_;
  std::vector<int64_t> order_;
};

}  // namespace saturate

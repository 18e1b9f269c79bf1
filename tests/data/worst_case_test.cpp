// Worst-case batches: the b costliest items, checked against every batch of b items a loader
// could draw (brute force on a small dataset), and the token-budget batches against their budget.
#include "saturate/data/token_budget.h"
#include "saturate/data/worst_case.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "saturate/core/errors.h"
#include "saturate/data/sampler.h"
#include "support/support.h"

using namespace saturate;

namespace {

int64_t padded(const std::vector<int64_t>& sizes, const std::vector<int64_t>& items) {
  int64_t longest = 0;
  for (int64_t i : items) longest = std::max(longest, sizes[static_cast<size_t>(i)]);
  return longest * static_cast<int64_t>(items.size());
}

int64_t summed(const std::vector<int64_t>& sizes, const std::vector<int64_t>& items) {
  int64_t s = 0;
  for (int64_t i : items) s += sizes[static_cast<size_t>(i)];
  return s;
}

std::vector<int64_t> long_tailed(int64_t n, uint64_t seed) {
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = mix64(seed + static_cast<uint64_t>(i));
    // most items short, a few long: lengths 8..40, one in 16 up to 200
    sizes.push_back(r % 16 == 0 ? 100 + static_cast<int64_t>(r % 101) : 8 + static_cast<int64_t>((r >> 8) % 33));
  }
  return sizes;
}

}  // namespace

TEST(WorstCaseTest, NoBatchOfTheSameSizeIsCostlierThanTheWorstBatch) {
  const std::vector<int64_t> sizes = long_tailed(12, 3);
  const WorstCaseOrder order(sizes);
  for (int64_t b = 1; b <= 12; ++b) {
    const std::vector<int64_t> worst = order.worst_items(b);
    // every subset of b items: padded to its longest, and summed, none exceeds the worst batch
    for (uint32_t mask = 0; mask < (1u << 12); ++mask) {
      if (__builtin_popcount(mask) != b) continue;
      std::vector<int64_t> items;
      for (int64_t i = 0; i < 12; ++i)
        if (mask & (1u << i)) items.push_back(i);
      ASSERT_LE(padded(sizes, items), padded(sizes, worst)) << "batch " << b;
      ASSERT_LE(summed(sizes, items), summed(sizes, worst)) << "batch " << b;
    }
    EXPECT_EQ(order.padded_worst_tokens(b), padded(sizes, worst));
  }
}

TEST(WorstCaseTest, ARandomEpochsBatchesNeverExceedTheWorstBatchButTheFirstOnesDoNotReachIt) {
  const std::vector<int64_t> sizes = long_tailed(2000, 11);
  const WorstCaseOrder order(sizes);
  const int64_t b = 16;
  const std::vector<int64_t> epoch = epoch_order(2000, 5, 0, ShardOptions{});
  int64_t largest_seen = 0;
  for (size_t start = 0; start + b <= epoch.size(); start += b) {
    const std::vector<int64_t> batch(epoch.begin() + static_cast<long>(start), epoch.begin() + static_cast<long>(start + b));
    largest_seen = std::max(largest_seen, padded(sizes, batch));
    ASSERT_LE(padded(sizes, batch), order.padded_worst_tokens(b));
  }
  const std::vector<int64_t> first(epoch.begin(), epoch.begin() + b);
  EXPECT_LT(padded(sizes, first), largest_seen);  // what a search on the first batch would size for
  EXPECT_EQ(order.largest_size(), *std::max_element(sizes.begin(), sizes.end()));
}

TEST(WorstCaseTest, MedianItemsSitAroundTheMedianSize) {
  std::vector<int64_t> sizes(101);
  std::iota(sizes.begin(), sizes.end(), 1);  // 1..101, median 51
  const WorstCaseOrder order(sizes);
  EXPECT_EQ(order.median_size(), 51);
  const std::vector<int64_t> items = order.median_items(5);
  std::set<int64_t> got;
  for (int64_t i : items) got.insert(sizes[static_cast<size_t>(i)]);
  EXPECT_EQ(got, (std::set<int64_t>{49, 50, 51, 52, 53}));
}

TEST(WorstCaseTest, ABatchLargerThanTheDataRepeatsItsCostliestItems) {
  const WorstCaseOrder order({3, 9, 5});
  EXPECT_EQ(order.worst_items(5), (std::vector<int64_t>{1, 2, 0, 1, 2}));
  EXPECT_EQ(order.median_items(4).size(), 4u);
}

TEST(WorstCaseTest, EmptyDataOrAnEmptyItemIsAUsageErrorNamingIt) {
  EXPECT_THROW(WorstCaseOrder(std::vector<int64_t>{}), UsageError);
  try {
    WorstCaseOrder({4, 0, 2}, "data");
    FAIL() << "an item of size 0 was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("item 1"), std::string::npos) << e.what();
  }
}

TEST(TokenBudgetTest, EveryItemOnceAndNoBatchOverTheBudget) {
  const std::vector<int64_t> lengths = long_tailed(3000, 7);
  TokenBudgetOptions o;
  o.max_tokens = 1600;
  o.seed = 9;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto batches = token_budget_batches(lengths, o, epoch);
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      ASSERT_LE(batch_tokens(lengths, b).padded, o.max_tokens);
      for (int64_t i : b) ++seen[static_cast<size_t>(i)];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << "epoch " << epoch;
  }
  // epochs differ (shuffled), the same epoch is the same
  EXPECT_NE(token_budget_batches(lengths, o, 0), token_budget_batches(lengths, o, 1));
  EXPECT_EQ(token_budget_batches(lengths, o, 2), token_budget_batches(lengths, o, 2));
}

TEST(TokenBudgetTest, GroupingByLengthWastesLessThanFixedBatchesOfTheWorstCase) {
  const std::vector<int64_t> lengths = long_tailed(3000, 13);
  const WorstCaseOrder order(lengths);
  const int64_t fixed = 8;  // the batch that fits the longest items
  TokenBudgetOptions o;
  o.max_tokens = order.padded_worst_tokens(fixed);
  const auto batches = token_budget_batches(lengths, o, 0);
  int64_t padded_sum = 0, real_sum = 0;
  for (const auto& b : batches) {
    const BatchTokens t = batch_tokens(lengths, b);
    padded_sum += t.padded;
    real_sum += t.real;
  }
  // fixed batches of 8 in a random order, padded to each batch's longest
  const std::vector<int64_t> epoch = epoch_order(3000, 1, 0, ShardOptions{});
  int64_t fixed_padded = 0;
  for (size_t s = 0; s < epoch.size(); s += fixed)
    fixed_padded += padded(lengths, std::vector<int64_t>(epoch.begin() + static_cast<long>(s),
                                                         epoch.begin() + static_cast<long>(std::min(s + fixed, epoch.size()))));
  EXPECT_LT(static_cast<double>(padded_sum), 0.8 * static_cast<double>(fixed_padded));
  EXPECT_GT(static_cast<double>(real_sum) / static_cast<double>(padded_sum), 0.9);  // little padding left
  EXPECT_LT(batches.size() * 2, epoch.size() / fixed);  // fewer, fuller steps
}

TEST(TokenBudgetTest, AnItemLongerThanTheBudgetIsAUsageErrorNamingIt) {
  TokenBudgetOptions o;
  o.max_tokens = 50;
  try {
    (void)token_budget_batches({10, 80, 20}, o, 0);
    FAIL() << "an item longer than max_tokens was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.option(), "max_tokens");
    EXPECT_NE(std::string(e.what()).find("item 1's length 80"), std::string::npos) << e.what();
  }
  o.max_tokens = 0;
  EXPECT_THROW((void)token_budget_batches({1}, o, 0), UsageError);
}

TEST(TokenBudgetTest, MaxItemsCapsABatchOfShortItems) {
  TokenBudgetOptions o;
  o.max_tokens = 1000;
  o.max_items = 4;
  const auto batches = token_budget_batches(std::vector<int64_t>(10, 2), o, 0);
  for (const auto& b : batches) EXPECT_LE(b.size(), 4u);
  EXPECT_EQ(batches.size(), 3u);
}

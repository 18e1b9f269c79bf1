#include "saturate/train/share_balance.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

namespace saturate {
namespace {

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(ShareBalance, ARankThatTurnedTwiceAsSlowGetsAboutAThirdOfTheBatchAndTheSlowestPartShrinks) {
  // equal shares; rank 0 now needs twice the time for its 64 samples
  const ShareBalance b = balance_shares({64, 64}, {100.0, 50.0}, 1.05);
  ASSERT_TRUE(b.resplit);
  EXPECT_EQ(sum(b.proposed), 128);
  EXPECT_NEAR(static_cast<double>(b.proposed[0]), 128.0 / 3.0, 1.0);
  EXPECT_LT(b.predicted_slowest_ms, 100.0 * 0.7);  // 43 samples at 0.64 samples/ms: about 67 ms
  EXPECT_GT(b.gain, 1.4);
  EXPECT_EQ(b.slowest_busy_ms, 100.0);
}

TEST(ShareBalance, RanksThatFinishTheirPartsTogetherKeepTheirShares) {
  const ShareBalance b = balance_shares({90, 38}, {61.0, 60.0}, 1.05);
  EXPECT_FALSE(b.resplit) << b.gain;
  EXPECT_LT(b.gain, 1.05);
  EXPECT_EQ(b.shares, (std::vector<int64_t>{90, 38}));
}

TEST(ShareBalance, AGainOfOneReSplitsWheneverTheSplitBySpeedDiffersEvenWhenRoundingPredictsAHairSlower) {
  // 4 and 1 of 5 samples at 2 and 0.98 samples/ms: the exact split 3.36 / 1.64 rounds to 3 / 2,
  // whose slower part (2 / 0.98 = 2.04 ms) is a hair over today's 2 ms
  const ShareBalance b = balance_shares({4, 1}, {2.0, 1.0 / 0.98}, 1.0);
  EXPECT_EQ(b.proposed, (std::vector<int64_t>{3, 2}));
  EXPECT_LT(b.gain, 1.0);
  EXPECT_TRUE(b.resplit);
  EXPECT_FALSE(balance_shares({4, 1}, {2.0, 1.0 / 0.98}, 1.05).resplit);
  // already in proportion: the split by speed is the same, nothing to do
  EXPECT_FALSE(balance_shares({48, 48}, {20.0, 20.0}, 1.0).resplit);
}

TEST(ShareBalance, ANoisyLookOrAMissingTimeLeavesTheSharesAlone) {
  EXPECT_FALSE(balance_shares({64, 64}, {0.0, 50.0}, 1.05).resplit);
  EXPECT_FALSE(balance_shares({64, 64}, {50.0}, 1.05).resplit);
  EXPECT_FALSE(balance_shares({128}, {50.0}, 1.05).resplit);
}

TEST(ShareBalance, RepeatedLooksAtRanksWithFixedStepCostsConvergeToEqualBusyTimesAndStop) {
  // each rank's busy time: a fixed cost a step (optimizer, launch) plus its samples at its own
  // pace; the split by share / busy ignores the fixed part, so one look cannot be exact
  const double fixed_ms[] = {8.0, 2.0, 5.0};
  const double ms_per_sample[] = {0.1, 0.45, 0.2};
  std::vector<int64_t> shares = {683, 683, 682};
  const auto busy = [&](const std::vector<int64_t>& s) {
    std::vector<double> b;
    for (size_t r = 0; r < s.size(); ++r) b.push_back(fixed_ms[r] + ms_per_sample[r] * static_cast<double>(s[r]));
    return b;
  };
  int changes = 0;
  for (int look = 0; look < 12; ++look) {
    const ShareBalance b = balance_shares(shares, busy(shares), 1.02);
    if (!b.resplit) break;
    ++changes;
    EXPECT_EQ(sum(b.proposed), 2048);
    shares = b.proposed;
  }
  EXPECT_GE(changes, 1);
  EXPECT_LE(changes, 4);  // it stops: a balanced split is not re-split again
  const std::vector<double> end = busy(shares);
  const double slowest = *std::max_element(end.begin(), end.end());
  const double fastest = *std::min_element(end.begin(), end.end());
  EXPECT_LT(slowest / fastest, 1.05) << end[0] << " " << end[1] << " " << end[2];
}

TEST(ShareBalance, TheChangeReadsAsTheStepTheOldAndNewSharesAndTheGain) {
  ShareBalance b = balance_shares({64, 64}, {100.0, 50.0}, 1.05);
  b.step = 20;
  const std::string text = share_change_text(b);
  EXPECT_NE(text.find("step 20: shares 64,64 -> 43,85"), std::string::npos) << text;
  EXPECT_NE(text.find("busy 100.0 / 50.0 ms a step"), std::string::npos) << text;
}

}  // namespace
}  // namespace saturate

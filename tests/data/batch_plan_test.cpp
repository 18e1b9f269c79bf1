// The batch plan: micro-batch x accumulation x ranks = global batch, completed from any two,
// with errors that name the option they concern (the command line turns it into its flag).
#include "saturate/data/batch_plan.h"

#include <regex>
#include <sstream>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::string option_of(const BatchRequest& r) {
  try {
    check_batch_request(r);
  } catch (const UsageError& e) {
    return e.option();
  }
  return "";
}

/// The value of one side of printed arithmetic: its numbers joined by "x" (products) and "+"
/// (sums), the words between them ignored ("micro", "per rank", "(a shorter last one)").
int64_t evaluate(const std::string& side) {
  static const std::regex token(R"((\d+)|(\+)|(\bx\b))");
  int64_t sum = 0, product = 0;
  bool have = false;
  for (auto it = std::sregex_iterator(side.begin(), side.end(), token); it != std::sregex_iterator(); ++it) {
    if ((*it)[1].matched) {
      const int64_t n = std::stoll((*it)[1].str());
      product = have ? product * n : n;
      have = true;
    } else if ((*it)[2].matched) {
      sum += product;
      have = false;
    }
  }
  return sum + (have ? product : 0);
}

}  // namespace

TEST(BatchPlanTest, ThePrintedArithmeticHoldsForEveryMicroBatchAndRankCount) {
  // evaluated from the text itself: every "=" joins sides of equal value (a "per rank" side
  // times its ranks is the next one), and the last side is the global batch
  for (int world = 1; world <= 3; ++world)
    for (int64_t global : {int64_t{100}, int64_t{8192}, int64_t{96}})
      for (int64_t micro : {int64_t{1}, int64_t{7}, int64_t{32}, int64_t{62}, int64_t{64}, int64_t{99}}) {
        if (global % world) continue;
        BatchRequest r;
        r.global_batch = global;
        r.world_size = world;
        const BatchPlan p = plan_batches(r, micro);
        for (const std::string& text : {p.text(), batch_arithmetic(p.micro_batch, p.accumulation, world, global)}) {
          std::vector<std::string> sides;
          std::stringstream ss(text);
          for (std::string side; std::getline(ss, side, '=');) sides.push_back(side);
          ASSERT_GE(sides.size(), 2u) << text;
          EXPECT_EQ(evaluate(sides.back()), global) << text;
          for (size_t i = 0; i + 1 < sides.size(); ++i) {
            const int64_t next = evaluate(sides[i + 1]);
            const bool per_rank = sides[i + 1].find("per rank") != std::string::npos;
            EXPECT_EQ(per_rank ? evaluate(sides[i]) * world : evaluate(sides[i]), next) << text;
          }
          if (p.last_micro_batch() != p.micro_batch) {
            EXPECT_NE(text.find("a shorter last one"), std::string::npos) << text;
          }
        }
      }
}

TEST(BatchPlanTest, AGlobalBatchSplitsIntoAccumulatedMicroBatchesPerRank) {
  BatchRequest r;
  r.global_batch = 256;
  r.world_size = 2;
  const BatchPlan p = plan_batches(r, 32);
  EXPECT_EQ(p.micro_batch, 32);
  EXPECT_EQ(p.accumulation, 4);
  EXPECT_EQ(p.rank_batch, 128);
  EXPECT_EQ(p.global_batch, 256);
  EXPECT_EQ(p.text(), "micro 32 x 4 x 2 ranks = global 256");
}

TEST(BatchPlanTest, AMicroBatchAboveTheShareIsCutToIt) {
  BatchRequest r;
  r.global_batch = 100;
  const BatchPlan p = plan_batches(r, 572);
  EXPECT_EQ(p.micro_batch, 100);
  EXPECT_EQ(p.accumulation, 1);
}

TEST(BatchPlanTest, ASearchedMicroBatchThatDoesNotDivideTheShareGetsAShortLastMicroBatch) {
  BatchRequest r;
  r.global_batch = 4096;
  const BatchPlan p = plan_batches(r, 1000);
  EXPECT_EQ(p.accumulation, 5);  // 4 x 1000 + 96
  EXPECT_EQ(p.rank_batch, 4096);
}

TEST(BatchPlanTest, WithoutAGlobalBatchTheAccumulationDefaultsToOne) {
  BatchRequest r;
  EXPECT_EQ(plan_batches(r, 64).global_batch, 64);
  r.accumulation = 3;
  EXPECT_EQ(plan_batches(r, 64).global_batch, 192);
}

TEST(BatchPlanTest, ErrorsNameTheOptionTheyConcern) {
  BatchRequest negative_micro;
  negative_micro.micro_batch = -1;
  EXPECT_EQ(option_of(negative_micro), "micro_batch");
  BatchRequest negative_accumulation;
  negative_accumulation.accumulation = -2;
  EXPECT_EQ(option_of(negative_accumulation), "accumulation");
  BatchRequest indivisible;
  indivisible.global_batch = 257;
  indivisible.world_size = 2;
  EXPECT_EQ(option_of(indivisible), "global_batch");
  BatchRequest inconsistent;
  inconsistent.micro_batch = 32;
  inconsistent.accumulation = 2;
  inconsistent.global_batch = 128;
  EXPECT_EQ(option_of(inconsistent), "global_batch");
  BatchRequest fine;
  fine.micro_batch = 32;
  fine.global_batch = 128;
  EXPECT_EQ(option_of(fine), "");
  // a count given as 0 is not "leave it to saturate" (that is not giving it): an error naming it
  for (const char* option : {"micro_batch", "accumulation", "global_batch"}) {
    BatchRequest zero;
    (option == std::string("micro_batch")    ? zero.micro_batch
     : option == std::string("accumulation") ? zero.accumulation
                                             : zero.global_batch) = 0;
    EXPECT_EQ(option_of(zero), option);
    ASSERT_THROWS_WITH(check_batch_request(zero), UsageError, "0 is not a positive integer");
  }
}

TEST(BatchPlanTest, AnIndivisibleGlobalBatchNamesTheNearestMultiples) {
  ASSERT_THROWS_WITH(rank_share(257, 2), UsageError, "256 or 258");
}

TEST(BatchPlanTest, TheSearchCapIsTheRanksShareOverTheAccumulation) {
  BatchRequest r;
  r.global_batch = 512;
  r.world_size = 2;
  EXPECT_EQ(micro_batch_limit(r), 256);
  r.accumulation = 4;
  EXPECT_EQ(micro_batch_limit(r), 64);
  EXPECT_FALSE(micro_batch_limit(BatchRequest{}).has_value());  // no global batch: no cap
}

TEST(BatchPlanTest, UnequalSharesGiveEachRankItsOwnShareAndAccumulationSummingToTheGlobalBatch) {
  BatchRequest r;
  r.world_size = 3;
  r.shares = {48, 10, 6};  // no global batch given: it is their sum
  int64_t total = 0;
  for (int rank = 0; rank < 3; ++rank) {
    r.rank = rank;
    const BatchPlan p = plan_batches(r, 16);
    EXPECT_EQ(p.rank_batch, r.shares[static_cast<size_t>(rank)]) << "rank " << rank;
    EXPECT_EQ(p.global_batch, 64);
    // micro-batches that cover the share: whole ones, the last one shorter where 16 does not divide it
    EXPECT_LE(p.micro_batch, 16);
    EXPECT_GE(p.micro_batch * p.accumulation, p.rank_batch);
    EXPECT_LT(p.micro_batch * (p.accumulation - 1), p.rank_batch);
    EXPECT_GT(p.last_micro_batch(), 0);
    total += p.rank_batch;
  }
  EXPECT_EQ(total, 64);
  // each rank's text says its own arithmetic, which holds, not micro x accumulation x ranks
  r.rank = 1;
  const BatchPlan one = plan_batches(r, 16);
  EXPECT_EQ(one.text(), "micro 10 x 1 = 10 on this rank, of global 64 over 3 ranks (unequal shares)");
  r.rank = 0;
  EXPECT_EQ(plan_batches(r, 20).text(), "micro 20 x 2 + 8 (a shorter last one) = 48 on this rank, of global 64 over 3 "
                                        "ranks (unequal shares)");
  // the search's cap is the same on every rank (they run in step): the largest share
  for (int rank = 0; rank < 3; ++rank) {
    r.rank = rank;
    EXPECT_EQ(micro_batch_limit(r), 48);
  }
  r.global_batch = 64;  // given and equal to the sum: fine
  EXPECT_EQ(option_of(r), "");
}

TEST(BatchPlanTest, SharesThatDoNotFitTheRanksOrTheGlobalBatchAreUsageErrorsNamingThem) {
  BatchRequest r;
  r.world_size = 2;
  r.shares = {48, 16, 8};
  ASSERT_THROWS_WITH(check_batch_request(r), UsageError, "3 values for 2 ranks");
  r.shares = {48, 16};
  r.global_batch = 60;
  ASSERT_THROWS_WITH(check_batch_request(r), UsageError, "add up to 64, not the global batch 60");
  r.global_batch.reset();
  r.shares = {48, 0};
  ASSERT_THROWS_WITH(check_batch_request(r), UsageError, "rank 1's share is 0");
  r.shares = {48, 16};
  r.accumulation = 2;
  EXPECT_EQ(option_of(r), "accumulation");
  EXPECT_EQ(parse_shares("48,16").counts, (std::vector<int64_t>{48, 16}));
  EXPECT_FALSE(parse_shares("").given());
  EXPECT_TRUE(parse_shares("auto").by_speed);
  EXPECT_TRUE(parse_shares("auto").counts.empty());
  ASSERT_THROWS_WITH(parse_shares("48,x"), UsageError, "'x' in '48,x' is not a positive whole number");
  ASSERT_THROWS_WITH(parse_shares("48,-2"), UsageError, "'-2'");
  ASSERT_THROWS_WITH(parse_shares("48,,16"), UsageError, "'' in");
}

TEST(BatchPlanTest, SharesBySpeedAreProportionalToEachRanksSamplesPerSecondAndSumToTheGlobalBatch) {
  // twice as fast: twice the share, so both ranks take as long for their part of a step
  EXPECT_EQ(shares_by_speed(63, {200.0, 100.0}), (std::vector<int64_t>{42, 21}));
  // 64 does not split 2:1 in whole samples: the largest remainder gets the extra one
  EXPECT_EQ(shares_by_speed(64, {200.0, 100.0}), (std::vector<int64_t>{43, 21}));
  EXPECT_EQ(shares_by_speed(64, {1.0, 1.0, 1.0, 1.0}), (std::vector<int64_t>{16, 16, 16, 16}));
  // a very slow rank still gets a sample (every rank takes part in every step)
  const auto tiny = shares_by_speed(10, {1000.0, 1.0});
  EXPECT_EQ(tiny, (std::vector<int64_t>{9, 1}));
  for (int64_t global : {3, 7, 100, 257}) {
    const auto s = shares_by_speed(global, {3.0, 1.0, 0.5});
    int64_t sum = 0;
    for (int64_t v : s) {
      EXPECT_GE(v, 1);
      sum += v;
    }
    EXPECT_EQ(sum, global);
    EXPECT_GE(s[0], s[1]);
    EXPECT_GE(s[1], s[2]);
  }
  ASSERT_THROWS_WITH(shares_by_speed(1, {1.0, 1.0}), UsageError, "give `global_batch` 2 or more");
  ASSERT_THROWS_WITH(shares_by_speed(8, {1.0, 0.0}), RuntimeFailure, "rank 1's speed measured 0");
}

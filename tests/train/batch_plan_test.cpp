// The batch plan: micro-batch x accumulation x ranks = global batch, completed from any two,
// with errors that name the option they concern (the command line turns it into its flag).
#include "saturate/train/batch_plan.h"

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

}  // namespace

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
  EXPECT_EQ(micro_batch_limit(BatchRequest{}), 0);
}

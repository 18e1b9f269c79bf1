// The law of a rank's model states under each sharding strategy (search/fixed_cost.h), the one
// the command line and saturate.shard_plan share, against hand arithmetic.
#include "saturate/search/fixed_cost.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {
constexpr int64_t MiB = int64_t{1} << 20;
}

TEST(ShardLawTest, EachStrategysModelStatesAreWhatItKeepsWholeAndWhatItSplits) {
  // 100 MiB of weights, Adam (2 copies of state), the largest unit 10 MiB, 4 ranks
  EXPECT_EQ(shard_model_state_bytes(ShardStrategy::kReplicated, 100 * MiB, 2.0, 10 * MiB, 4), 400 * MiB);
  // weights whole, gradients and state split: 100 + 300 / 4
  EXPECT_EQ(shard_model_state_bytes(ShardStrategy::kShardGradients, 100 * MiB, 2.0, 10 * MiB, 4), 175 * MiB);
  // everything split, one unit's weights and gradients gathered: 400 / 4 + 2 x 10
  EXPECT_EQ(shard_model_state_bytes(ShardStrategy::kShardAll, 100 * MiB, 2.0, 10 * MiB, 4), 120 * MiB);
  EXPECT_EQ(parse_shard_strategy("fsdp_no_reshard"), ShardStrategy::kShardGradients);
  ASSERT_THROWS_WITH(parse_shard_strategy("zero3"), UsageError, "ddp, fsdp_no_reshard or fsdp");
}

TEST(ShardLawTest, TheSmallestWorldSizeIsTheFirstWhoseModelStatesFitAndNoneWhereTheWholePartDoesNot) {
  // fsdp, 100 MiB weights, Adam, unit 10 MiB, 130 MiB ranks: 400 / N + 20 < 130 from N = 4 (3: 153)
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kShardAll, 100 * MiB, 2.0, 10 * MiB, 130 * MiB), 4);
  EXPECT_LT(shard_model_state_bytes(ShardStrategy::kShardAll, 100 * MiB, 2.0, 10 * MiB, 4), 130 * MiB);
  EXPECT_GT(shard_model_state_bytes(ShardStrategy::kShardAll, 100 * MiB, 2.0, 10 * MiB, 3), 130 * MiB);
  // fsdp_no_reshard keeps the 100 MiB of weights whole: 100 + 300 / N < 130 from N = 10
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kShardGradients, 100 * MiB, 2.0, 10 * MiB, 130 * MiB), 10);
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kShardGradients, 100 * MiB, 2.0, 10 * MiB, 90 * MiB), 0);
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kReplicated, 100 * MiB, 2.0, 10 * MiB, 401 * MiB), 1);
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kReplicated, 100 * MiB, 2.0, 10 * MiB, 400 * MiB), 0);
  EXPECT_EQ(shard_min_world_size(ShardStrategy::kShardAll, 100 * MiB, 2.0, 70 * MiB, 130 * MiB), 0);
  // the command line's form: the optimizer's state in the cost gives the factor
  EXPECT_EQ(min_ranks_to_shard(fixed_cost_of(100 * MiB, 2, "adam"), 10 * MiB, 130 * MiB), 4);
}

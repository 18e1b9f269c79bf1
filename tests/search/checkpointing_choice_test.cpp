// `search --checkpointing auto`'s choice, on searches run against fake runners whose memory and
// time laws differ the way checkpointing changes them: less memory per sample, more time per
// sample (the recomputed forward pass).
#include "saturate/search/checkpointing_choice.h"

#include "search/fake_runner.h"
#include "support/support.h"

using namespace saturate;
using saturate::testing::FakeLaw;
using saturate::testing::FakeRunner;

namespace {

SearchResult search(FakeLaw law) {
  FakeRunner runner(law);
  return search_batch_size(runner, SearchOptions{});
}

/// Without checkpointing: 1.3 MiB a sample; with it: 0.4 MiB and 30 % more compute per sample.
struct Pair {
  FakeLaw without, with;
};
Pair pair(double launch_ms) {
  Pair p;
  p.without.launch_ms = p.with.launch_ms = launch_ms;
  p.with.per_sample_bytes = 400 << 10;
  p.with.per_sample_ms = p.without.per_sample_ms * 1.3;
  return p;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CheckpointingChoiceTest, ChoosesCheckpointingWhenTheLargerBatchItAllowsIsFaster) {
  // a launch-bound device (GPU-like): samples/s keeps growing with the batch, so the batches
  // only checkpointing lets fit outrun the recomputation.
  const Pair p = pair(/*launch_ms=*/200);
  const SearchResult without = search(p.without), with = search(p.with);
  ASSERT_GT(with.max_batch, without.max_batch);
  const CheckpointingChoice c = choose_checkpointing(without, with, "blocks", 0, 0.03);
  EXPECT_EQ(c.choice, "blocks") << c.reason;
  EXPECT_GT(c.best_with.batch, without.max_batch);
  EXPECT_GT(c.best_with.samples_per_s, c.best_without.samples_per_s);
  EXPECT_TRUE(contains(c.reason, "blocks lets batch")) << c.reason;
}

TEST(CheckpointingChoiceTest, KeepsNoCheckpointingWhenThroughputIsAlreadySaturated) {
  // compute-bound (CPU-like): samples/s saturates at small batches; recomputing costs 30 %.
  const Pair p = pair(/*launch_ms=*/1);
  const SearchResult without = search(p.without), with = search(p.with);
  ASSERT_GT(with.max_batch, without.max_batch);
  const CheckpointingChoice c = choose_checkpointing(without, with, "blocks", 0, 0.03);
  EXPECT_EQ(c.choice, "none") << c.reason;
  EXPECT_TRUE(contains(c.reason, "does not pay")) << c.reason;
  EXPECT_TRUE(contains(c.reason, std::to_string(without.max_batch))) << c.reason;
  EXPECT_TRUE(contains(c.reason, std::to_string(with.max_batch))) << c.reason;
}

TEST(CheckpointingChoiceTest, ChoosesCheckpointingWhenOnlyItFitsTheRequiredBatch) {
  const Pair p = pair(/*launch_ms=*/1);
  const SearchResult without = search(p.without), with = search(p.with);
  const int64_t required = (without.max_batch + with.max_batch) / 2;
  const CheckpointingChoice c = choose_checkpointing(without, with, "blocks", required, 0.03);
  EXPECT_EQ(c.choice, "blocks") << c.reason;
  EXPECT_TRUE(contains(c.reason, "required batch " + std::to_string(required) + " only fits with blocks")) << c.reason;
}

TEST(CheckpointingChoiceTest, KeepsNoCheckpointingWhenTheRequiredBatchFitsWithoutIt) {
  const Pair p = pair(/*launch_ms=*/200);  // even where checkpointing would be faster
  const SearchResult without = search(p.without), with = search(p.with);
  const CheckpointingChoice c = choose_checkpointing(without, with, "blocks", without.max_batch, 0.03);
  EXPECT_EQ(c.choice, "none") << c.reason;
  EXPECT_TRUE(contains(c.reason, "fits without checkpointing")) << c.reason;
}

TEST(CheckpointingChoiceTest, KeepsNoCheckpointingWhenItDoesNotRaiseTheMaxBatch) {
  FakeLaw same;
  same.launch_ms = 200;
  const SearchResult without = search(same), with = search(same);
  const CheckpointingChoice c = choose_checkpointing(without, with, "blocks", 0, 0.03);
  EXPECT_EQ(c.choice, "none") << c.reason;
  EXPECT_TRUE(contains(c.reason, "does not raise the max batch")) << c.reason;
}

TEST(CheckpointingChoiceTest, ChoosesCheckpointingWhenBatchOneOnlyFitsWithIt) {
  Pair p = pair(1);
  p.without.budget_bytes = p.with.budget_bytes = p.without.fixed_bytes + (1000 << 10);  // 1.3 MiB/sample does not fit
  const SearchResult without = search(p.without), with = search(p.with);
  ASSERT_EQ(without.max_batch, 0);
  ASSERT_GT(with.max_batch, 0);
  EXPECT_EQ(choose_checkpointing(without, with, "blocks", 0, 0.03).choice, "blocks");
}

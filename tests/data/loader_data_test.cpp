// The trainer's loader data in micro-batch pieces (LoaderOptions::parts): each step's batch is
// exactly the whole-batch loader's, resumed runs included, and a piece whose samples were all
// skipped leaves the rest of its batch.
#include "data/loader_data.h"

#include <torch/torch.h>

#include "data/data_fixtures.h"
#include "saturate/data/data_error.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

LoaderOptions options(int64_t batch, int64_t parts) {
  LoaderOptions o;
  o.batch_size = batch;
  o.parts = parts;
  o.workers = 2;
  o.seed = 11;
  o.shape = {1, 4, 4};
  return o;
}

}  // namespace

TEST(LoaderTrainDataTest, StepsFromPiecesAreTheStepsOfWholeBatchesResumedRunsIncluded) {
  auto ds = std::make_shared<StubDataset>(100);  // 7 steps of 14 per epoch; 2 samples dropped
  LoaderTrainData whole(ds, options(14, 1));
  LoaderTrainData pieces(ds, options(14, 4));  // 4, 4, 3, 3
  ASSERT_EQ(pieces.steps_per_epoch(), whole.steps_per_epoch());
  for (int64_t step : {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 3}) {  // a jump ahead, then back: a resume
    const Batch a = whole.batch_for_step(step);
    const Batch b = pieces.batch_for_step(step);
    ASSERT_EQ(b.inputs.size(0), 14) << "step " << step;
    EXPECT_TRUE(torch::equal(a.inputs, b.inputs)) << "step " << step;
    EXPECT_TRUE(torch::equal(a.targets, b.targets)) << "step " << step;
  }
}

TEST(LoaderTrainDataTest, APieceWithEverySampleSkippedLeavesTheRestOfItsBatch) {
  auto ds = std::make_shared<StubDataset>(40);
  LoaderOptions o = options(8, 4);  // pieces of 2
  o.shard.shuffle = false;          // batch 0 is samples 0..7: its second piece is 2 and 3
  o.skip_bad_samples = true;
  ds->on_get = [](int64_t index) {
    if (index == 2 || index == 3) throw DataError("stub-file", index, "unreadable");
  };
  LoaderTrainData data(ds, o);
  const Batch first = data.batch_for_step(0);
  ASSERT_EQ(first.inputs.size(0), 6);
  EXPECT_EQ(first.targets[0].item<int64_t>(), 0);
  EXPECT_EQ(first.targets[2].item<int64_t>(), 4) << "samples 2 and 3 left out, 4 follows 1";
  EXPECT_EQ(data.batch_for_step(1).inputs.size(0), 8);
}

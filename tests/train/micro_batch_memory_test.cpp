// The OOM guard's memory: after an out-of-memory, batches as costly start split, cheaper ones run whole.
#include "saturate/train/micro_batch_memory.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

TEST(MicroBatchMemoryTest, BatchesRunWholeUntilOneRunsOutOfMemory) {
  MicroBatchMemory m;
  EXPECT_EQ(m.micro_for(32, 100), 32);
  EXPECT_EQ(m.failed_tokens(), 0);
}

TEST(MicroBatchMemoryTest, AnOomHalvesAndTheWorkingSizeServesLaterBatchesAsLongOrLonger) {
  MicroBatchMemory m;
  // 32 items of 200 tokens fail, 16 fail, 8 run: 1600 tokens work, 3200 do not
  EXPECT_EQ(m.after_oom(32, 200, 32), 16);
  EXPECT_EQ(m.after_oom(32, 200, 16), 8);
  m.after_success(32, 200, 8);
  EXPECT_EQ(m.failed_tokens(), 3200);
  EXPECT_EQ(m.working_tokens(), 1600);
  EXPECT_EQ(m.micro_for(32, 200), 8);   // the same batch again: straight to what worked
  EXPECT_EQ(m.micro_for(32, 400), 4);   // longer items: fewer of them, the same tokens
  EXPECT_EQ(m.micro_for(32, 50), 32);   // short items: 1600 tokens, below the failure, whole
  EXPECT_EQ(m.micro_for(10, 250), 10);  // 2500 tokens, below the 3200 that failed: whole
  ASSERT_EQ(m.backoffs().size(), 2u);
  EXPECT_EQ(m.backoffs()[0].old_micro_batch, 32);
  EXPECT_EQ(m.backoffs()[1].new_micro_batch, 8);
}

TEST(MicroBatchMemoryTest, AMicroBatchOfOneHasNothingSmallerLeft) {
  MicroBatchMemory m;
  EXPECT_EQ(m.after_oom(4, 10, 1), 0);
}

TEST(MicroBatchMemoryTest, WhatWorkedOnceButLaterFailedIsForgotten) {
  MicroBatchMemory m;
  (void)m.after_oom(16, 100, 16);
  m.after_success(16, 100, 8);  // 800 tokens worked
  EXPECT_EQ(m.after_oom(16, 100, 8), 4);  // and then did not (fragmentation, a longer item)
  EXPECT_EQ(m.working_tokens(), 0);
  EXPECT_EQ(m.micro_for(16, 100), 4);  // half the failure's tokens until something works again
}

TEST(MicroBatchMemoryTest, ShapesBelowOneAreUsageErrors) {
  MicroBatchMemory m;
  EXPECT_THROW((void)m.micro_for(0, 10), UsageError);
  EXPECT_THROW((void)m.after_oom(4, 0, 2), UsageError);
}

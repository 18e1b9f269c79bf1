#include "saturate/train/lr_schedule.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

TEST(LrScheduleTest, WarmsUpLinearlyThenDecaysByCosineToTheFloor) {
  LrSchedule s;
  s.peak_lr = 1.0;
  s.warmup_steps = 4;
  s.decay = LrDecay::kCosine;
  s.total_steps = 14;
  s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 1.0);
  EXPECT_NEAR(s.lr_at(9), 0.55, 1e-12);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(s.lr_at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.lr_at(100), 0.1, 1e-12);
}

TEST(LrScheduleTest, StepDecayMultipliesByGammaEveryInterval) {
  LrSchedule s;
  s.peak_lr = 0.8;
  s.decay = LrDecay::kStep;
  s.step_every = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(s.lr_at(9), 0.8);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 0.4);
  EXPECT_DOUBLE_EQ(s.lr_at(25), 0.2);
}

TEST(LrScheduleTest, RescalesForTheGlobalBatch) {
  EXPECT_DOUBLE_EQ(scale_learning_rate(0.1, 1024, 256, LrScaling::kLinear), 0.4);
  EXPECT_DOUBLE_EQ(scale_learning_rate(0.1, 1024, 256, LrScaling::kSqrt), 0.2);
  EXPECT_DOUBLE_EQ(scale_learning_rate(0.1, 1024, 256, LrScaling::kNone), 0.1);
  ASSERT_THROWS_WITH(parse_lr_scaling("cubic"), UsageError, "expected linear, sqrt or none");
}

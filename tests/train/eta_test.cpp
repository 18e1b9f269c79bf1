#include "train/eta.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

using Clock = EtaEstimator::Clock;

Clock::time_point at_s(double s) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(EtaTest, NoEstimateUntilTwoPointsSpanSomeTime) {
  EtaEstimator eta;
  EXPECT_FALSE(eta.seconds_left(100));
  eta.observe(10, at_s(1));
  EXPECT_FALSE(eta.seconds_left(100));
  eta.observe(10, at_s(2));  // no step in between: no pace yet
  EXPECT_FALSE(eta.seconds_left(100));
  eta.observe(20, at_s(3));
  ASSERT_TRUE(eta.seconds_left(100));
}

TEST(EtaTest, ASteadyRunIsEstimatedAtItsPace) {
  EtaEstimator eta(30);
  for (int i = 0; i <= 100; ++i) eta.observe(10 * i, at_s(0.5 * i));  // 20 steps per second
  ASSERT_TRUE(eta.steps_per_s());
  EXPECT_NEAR(*eta.steps_per_s(), 20, 1e-9);
  EXPECT_NEAR(*eta.seconds_left(3000), (3000 - 1000) / 20.0, 1e-9);
  EXPECT_EQ(*eta.seconds_left(500), 0);  // past the end: nothing left
}

TEST(EtaTest, ARunThatSlowsDownIsEstimatedAtItsRecentPaceNotItsAverage) {
  EtaEstimator eta(10);
  double t = 0;
  int64_t steps = 0;
  for (int i = 0; i < 60; ++i) eta.observe(steps += 10, at_s(t += 0.1));  // 100 steps/s for 6 s
  for (int i = 0; i < 40; ++i) eta.observe(steps += 10, at_s(t += 1.0));  // then 10 steps/s for 40 s
  // the average since the start is 1000 steps in 46 s (~21.7 steps/s); the last 10 s ran at 10
  EXPECT_NEAR(*eta.steps_per_s(), 10, 0.5);
  EXPECT_NEAR(*eta.seconds_left(steps + 1000), 100, 5);
}

TEST(EtaTest, StepsReportedInBurstsAreEstimatedAtTheirRealPace) {
  // 10 ms steps whose losses are read every 10 steps: on_step runs for ten steps at once, 1 us apart
  EtaEstimator eta;
  double t = 0;
  for (int burst = 1; burst <= 5; ++burst) {
    t += 0.1;  // ten steps' time
    for (int i = 1; i <= 10; ++i) eta.observe((burst - 1) * 10 + i, at_s(t + 1e-6 * i));
    if (burst == 1) {
      EXPECT_FALSE(eta.steps_per_s()) << "one burst is one point: no pace yet, not ten steps in 10 us";
    } else {
      ASSERT_TRUE(eta.steps_per_s());
      EXPECT_NEAR(*eta.steps_per_s(), 100, 1) << "burst " << burst;
    }
  }
}

TEST(EtaTest, DurationsReadAsSecondsMinutesHoursAndDays) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(192), "3m12s");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 40), "2h05m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600), "3d04h");
  EXPECT_EQ(format_duration(-3), "0s");
}

}  // namespace
}  // namespace saturate

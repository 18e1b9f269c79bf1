// The leak detector on hand-made series of bytes-after-step.
#include "saturate/memory/leak_detector.h"

#include <nlohmann/json.hpp>

#include "support/support.h"

using namespace saturate;

TEST(LeakDetectorTest, FlatMemoryAfterWarmUpIsNoLeak) {
  LeakDetector d;
  const int64_t warm[] = {1000, 50000, 90000};  // optimizer state and caches appear first
  for (int i = 0; i < 3; ++i) d.observe(i, warm[i]);
  for (int i = 3; i < 50; ++i) d.observe(i, 90000);
  const LeakReport r = d.report();
  EXPECT_FALSE(r.detected);
  EXPECT_EQ(r.first_step, -1);
  EXPECT_EQ(r.bytes_per_step, 0);
  EXPECT_EQ(r.steps, 50);
  EXPECT_FALSE(d.warn_once());
}

TEST(LeakDetectorTest, SteadyGrowthIsReportedWithItsRateAndFirstStep) {
  LeakDetector d;
  for (int i = 0; i < 20; ++i) d.observe(i, 1000000 + (i >= 8 ? (i - 7) * 250000 : 0));
  const LeakReport r = d.report();
  EXPECT_TRUE(r.detected);
  EXPECT_EQ(r.first_step, 8);
  EXPECT_DOUBLE_EQ(r.bytes_per_step, 250000);
  EXPECT_EQ(r.warm_bytes, 1000000);
}

TEST(LeakDetectorTest, NoiseThatComesBackIsNoLeak) {
  LeakDetector d;
  for (int i = 0; i < 30; ++i) d.observe(i, 500000 + (i % 2) * 4096);
  EXPECT_FALSE(d.report().detected);
}

TEST(LeakDetectorTest, GrowthTooShortToJudgeIsNotYetALeak) {
  LeakDetector d;
  for (int i = 0; i < 5; ++i) d.observe(i, 1000 + (i >= 3 ? (i - 2) * 100000 : 0));
  EXPECT_FALSE(d.report().detected);  // two growing steps after warm-up: not enough
}

TEST(LeakDetectorTest, WarnsExactlyOnceInALongRun) {
  LeakDetector d;
  int warnings = 0;
  for (int i = 0; i < 100; ++i) {
    d.observe(i, 1000 + i * 8192);
    if (d.warn_once()) ++warnings;
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_TRUE(d.report().detected);
  EXPECT_NEAR(d.report().bytes_per_step, 8192, 1e-9);
}

TEST(LeakDetectorTest, JsonHasTheContractFields) {
  LeakDetector d;
  for (int i = 0; i < 10; ++i) d.observe(i, 100);
  const nlohmann::json j = leak_json(d.report());
  EXPECT_EQ(j["detected"], false);
  EXPECT_TRUE(j.contains("bytes_per_step"));
  EXPECT_EQ(j["first_step"], -1);
}

#include "saturate/search/memory_law.h"

#include "support/support.h"

using namespace saturate;

TEST(MemoryLawTest, LeastSquaresRecoversAnExactLine) {
  const MemoryLaw law = fit_memory_law({{1, 1100}, {2, 1200}, {4, 1400}, {10, 2000}});
  ASSERT_TRUE(law.valid);
  EXPECT_NEAR(law.fixed_bytes, 1000, 1e-6);
  EXPECT_NEAR(law.per_sample_bytes, 100, 1e-6);
  EXPECT_EQ(law.max_batch_within(2050), 10);
  EXPECT_EQ(law.max_batch_within(2000), 10);
  EXPECT_EQ(law.max_batch_within(1999), 9);
  EXPECT_EQ(law.max_batch_within(1050), 0);
}

TEST(MemoryLawTest, NeedsTwoBatchesAndGrowth) {
  EXPECT_FALSE(fit_memory_law({{4, 1000}}).valid);
  EXPECT_FALSE(fit_memory_law({{4, 1000}, {4, 1100}}).valid);
  EXPECT_FALSE(fit_memory_law({{2, 1000}, {4, 1000}}).valid);
  EXPECT_EQ(fit_memory_law({{2, 1000}, {4, 1000}}).max_batch_within(5000), -1);
}

TEST(MemoryLawTest, SecantUsesTheLargestPointAndOneAtMostThreeQuartersOfItsBatch) {
  // small batches carry a fixed workspace the large ones do not show: the secant ignores them.
  const MemoryLaw law = secant_memory_law({{1, 5000}, {2, 5100}, {75, 12500}, {100, 15000}, {90, 14000}});
  EXPECT_NEAR(law.per_sample_bytes, 100, 1e-9);
  EXPECT_NEAR(law.fixed_bytes, 5000, 1e-9);
}

TEST(MemoryLawTest, GranularityRoundsPredictionsUp) {
  MemoryLaw law;
  law.fixed_bytes = 0;
  law.per_sample_bytes = 300;
  law.granularity_bytes = 1024;
  law.valid = true;
  EXPECT_DOUBLE_EQ(law.predict_bytes(1), 1024);
  EXPECT_DOUBLE_EQ(law.predict_bytes(4), 2048);  // 1200 -> 2048
  EXPECT_DOUBLE_EQ(law.predict_bytes(6), 2048);  // 1800 -> 2048
  EXPECT_DOUBLE_EQ(law.predict_bytes(7), 3072);  // 2100 -> 3072
  EXPECT_EQ(law.max_batch_within(2048), 6);
  EXPECT_EQ(law.max_batch_within(3000), 6);
}

TEST(MemoryLawTest, LocalLawInterpolatesBetweenThePointsAroundTheLimit) {
  // curved data: a global line would miss, the two points around the limit do not.
  const std::vector<std::pair<int64_t, int64_t>> pts = {{10, 1000}, {100, 5000}, {200, 9000}, {300, 16000}};
  const MemoryLaw law = local_memory_law(pts, 12000);
  EXPECT_NEAR(law.per_sample_bytes, 70, 1e-9);
  EXPECT_EQ(law.max_batch_within(12000), 242);  // 9000 + 70*42 = 11940; 243 -> 12010
  // nothing over the limit: the secant of the largest point and one at most 3/4 of its batch
  const MemoryLaw ext = local_memory_law(pts, 20000);
  EXPECT_NEAR(ext.per_sample_bytes, (16000.0 - 9000.0) / 100.0, 1e-9);
}

#include <gtest/gtest.h>

#include "saturate/dist/network_measure.h"

namespace saturate {
namespace {

/// 0.1 ms latency, 1 MiB a millisecond, and an all-reduce that takes twice as long beside computation.
NetworkMeasure a_link_slowed_twice_by_computation() {
  NetworkMeasure m;
  m.world_size = 2;
  m.latency_ms = 0.1;
  m.algbw_bytes_per_s = 1048576.0 * 1000.0;
  m.allreduce_ms = 2.0;
  m.beside_compute_ms = 4.0;
  return m;
}

TEST(NetworkPrediction, BucketsSentDuringTheBackwardTakeTheSlowdownMeasuredBesideComputationAndTheLastDoesNot) {
  const NetworkMeasure m = a_link_slowed_twice_by_computation();
  EXPECT_DOUBLE_EQ(m.overlap_slowdown(), 2.0);
  // 3 MiB in DDP's buckets: 1 MiB first (sent while the backward computes), then the last 2 MiB
  EXPECT_NEAR(m.predicted_ddp_ms(int64_t{3} << 20), 2 * 0.1 + 1 * 2.0 + 2 * 1.0, 1e-9);
  // one bucket: sent once the backward is done, at the speed alone
  EXPECT_NEAR(m.predicted_ddp_ms(int64_t{1} << 19), 0.1 + 0.5, 1e-9);
  // 1 MiB buckets over 3.5 MiB: four, three of them overlapped
  EXPECT_NEAR(m.predicted_ddp_ms(int64_t{7} << 19, int64_t{1} << 20), 4 * 0.1 + 3 * 2.0 + 0.5, 1e-9);
}

TEST(NetworkPrediction, ABucketIsSlowedOnlyWhileTheBackwardStillComputesBesideIt) {
  const NetworkMeasure m = a_link_slowed_twice_by_computation();
  // 3 MiB: the 1 MiB first bucket takes 1 ms alone. The backward computes 0.5 ms more after it is
  // sent: at half speed a quarter of it moves then, the other three quarters alone (0.75 ms), a
  // flight of 1.25 ms; then the last 2 MiB (2 ms); two latencies (0.2 ms)
  EXPECT_NEAR(m.predicted_ms(int64_t{3} << 20, 2, int64_t{1} << 20, 0.5), 0.2 + 1.25 + 2.0, 1e-9);
  // 10 ms more of backward: the bucket's whole flight is beside it, 2 ms, as when it is not known
  EXPECT_NEAR(m.predicted_ms(int64_t{3} << 20, 2, int64_t{1} << 20, 10.0), 0.2 + 2.0 + 2.0, 1e-9);
  EXPECT_NEAR(m.predicted_ms(int64_t{3} << 20, 2, int64_t{1} << 20), 0.2 + 2.0 + 2.0, 1e-9);
  // nothing left to compute once it is sent: alone
  EXPECT_NEAR(m.predicted_ms(int64_t{3} << 20, 2, int64_t{1} << 20, 0.0), 0.2 + 1.0 + 2.0, 1e-9);
}

TEST(NetworkPrediction, AnAllReduceNoSlowerBesideComputationOrNotMeasuredThereIsPredictedAsAlone) {
  NetworkMeasure m = a_link_slowed_twice_by_computation();
  m.beside_compute_ms = 1.5;  // faster beside (noise): never below the time alone
  EXPECT_DOUBLE_EQ(m.overlap_slowdown(), 1.0);
  EXPECT_NEAR(m.predicted_ddp_ms(int64_t{3} << 20), 0.2 + 3.0, 1e-9);
  m.beside_compute_ms = 0;
  EXPECT_NEAR(m.predicted_ms(int64_t{3} << 20, 2, int64_t{1} << 20), 0.2 + 3.0, 1e-9);
}

}  // namespace
}  // namespace saturate

// Planning from two traces, on hand-made traces whose answers are computed by hand.
#include "saturate/memory/plan.h"

#include "saturate/core/errors.h"
#include "saturate/report/memory_text.h"
#include "support/support.h"

using namespace saturate;

namespace {

constexpr int64_t MiB = 1024 * 1024;

/// resident 1000 B; a 100 B/sample tensor, a 40 B temporary, a 20 B/sample temporary:
/// peak(b) = 1000 + 100 b + max(40, 20 b).
AllocationTrace linear_trace(int64_t b) {
  AllocationTrace t;
  t.batch = b;
  t.resident_bytes = {1000};
  t.ops = {{true, 0, 100 * b}, {true, 1, 40}, {false, 1, 40}, {true, 2, 20 * b}, {false, 0, 100 * b}, {false, 2, 20 * b}};
  return t;
}

/// one tensor of b MiB.
AllocationTrace mib_trace(int64_t b) {
  AllocationTrace t;
  t.batch = b;
  t.resident_bytes = {1000};
  t.ops = {{true, 0, b * MiB}, {false, 0, b * MiB}};
  return t;
}

}  // namespace

TEST(PlanTest, CardNamesAndSizesParse) {
  EXPECT_EQ(parse_plan_target("h200").capacity_bytes, 143771 * MiB);
  EXPECT_EQ(parse_plan_target("RTX4090").name, "rtx4090");
  EXPECT_EQ(parse_plan_target("a100-80gb").capacity_bytes, 81920 * MiB);
  EXPECT_EQ(parse_plan_target("24GiB").capacity_bytes, int64_t{24} << 30);
  ASSERT_THROWS_WITH(parse_plan_target("tpu-v5"), UsageError, "unknown card 'tpu-v5'");
  ASSERT_THROWS_WITH(parse_plan_target("0.5"), UsageError, "as a size such as 24GiB");
}

TEST(PlanTest, InterpolatedTraceIsExactForSizesLinearInTheBatch) {
  const AllocationTrace t = interpolate_trace(linear_trace(2), linear_trace(4), 37);
  const AllocationTrace want = linear_trace(37);
  ASSERT_EQ(t.ops.size(), want.ops.size());
  for (size_t i = 0; i < t.ops.size(); ++i) EXPECT_EQ(t.ops[i].bytes, want.ops[i].bytes) << i;
  EXPECT_EQ(replay_trace(t, AllocatorKind::kExact).peak_allocated_bytes, 1000 + 100 * 37 + 20 * 37);
}

TEST(PlanTest, ExactPlanFindsTheLargestBatchUnderTheCapacityAndTheTarget) {
  PlanOptions o;
  o.allocator = AllocatorKind::kExact;
  o.capacity_bytes = 13000;  // 1000 + 120 b <= 13000: b <= 100
  o.target_fraction = 0.5;   // 1000 + 120 b <= 6500: b <= 45
  const PlanResult p = plan_batch(linear_trace(2), linear_trace(4), o);
  EXPECT_EQ(p.max_batch, 100);
  EXPECT_EQ(p.recommended_batch, 45);
  EXPECT_EQ(p.predicted_peak_bytes, 1000 + 120 * 45);
  EXPECT_EQ(p.predicted_max_peak_bytes, 13000);
  EXPECT_EQ(p.target_bytes, 6500);
  EXPECT_EQ(p.context_bytes, 0);
  const nlohmann::json j = plan_json(p);
  for (const char* key : {"target_bytes", "max_batch", "recommended_batch", "predicted_peak_bytes"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_NE(plan_text(p).find("PREDICTION"), std::string::npos);
}

TEST(PlanTest, CudaPlanRoundsToSegmentsAndCountsTheWorkspace) {
  // reserved(b) = 2 MiB (small segment: parameters) + 32 MiB (cuBLAS workspace) + the b MiB
  // tensor's segment (2 MiB multiples from 10 MiB on).
  PlanOptions o;
  o.allocator = AllocatorKind::kCudaCaching;
  o.context_bytes = 0;
  o.capacity_bytes = 134 * MiB;  // 34 + seg(b) <= 134: seg(b) <= 100 MiB: b <= 100
  o.target_fraction = 0.5;       // 34 + seg(b) <= 67: seg(b) <= 33 MiB: b <= 32
  const PlanResult p = plan_batch(mib_trace(10), mib_trace(20), o);
  EXPECT_EQ(p.max_batch, 100);
  EXPECT_EQ(p.recommended_batch, 32);
  EXPECT_EQ(p.predicted_peak_bytes, 66 * MiB);
  EXPECT_EQ(p.workspace_bytes, kCudaWorkspaceBytes);
  // an odd batch rounds up to the next 2 MiB: 11 MiB takes a 12 MiB segment.
  EXPECT_EQ(replay_trace(mib_trace(11), AllocatorKind::kCudaCaching).peak_reserved_bytes, (2 + 32 + 12) * MiB);
  // under 10 MiB: a 20 MiB segment.
  EXPECT_EQ(replay_trace(mib_trace(3), AllocatorKind::kCudaCaching).peak_reserved_bytes, (2 + 32 + 20) * MiB);
}

TEST(PlanTest, TheContextComesOffTheCard) {
  PlanOptions o;
  o.capacity_bytes = kCudaContextBytes + 134 * MiB;
  o.target_fraction = 1.0;
  const PlanResult p = plan_batch(mib_trace(10), mib_trace(20), o);
  EXPECT_EQ(p.context_bytes, kCudaContextBytes);
  EXPECT_EQ(p.max_batch, 100);
}

TEST(PlanTest, TracesThatDoNotAlignAreRefusedWithAHint) {
  AllocationTrace b = linear_trace(4);
  b.ops.push_back({true, 3, 8});
  ASSERT_THROWS_WITH(interpolate_trace(linear_trace(2), b, 8), RuntimeFailure, "different allocations");
}

TEST(PlanTest, TraceFromALogDropsFreesOfOlderMemoryAndKeepsTheRestResident) {
  MemoryEventLog log;
  log.start_allocated_bytes = 1500;
  log.events = {{MemoryEvent::kAlloc, 64, 7, 0}, {MemoryEvent::kFree, 32, 99, 0}, {MemoryEvent::kFree, 64, 7, 0}};
  const AllocationTrace t = trace_from_log(log, 8, {1000, 400});
  ASSERT_EQ(t.resident_bytes.size(), 3u);
  EXPECT_EQ(t.resident_bytes[2], 100);
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_TRUE(t.ops[0].alloc);
  EXPECT_FALSE(t.ops[1].alloc);
  EXPECT_EQ(t.ops[1].id, t.ops[0].id);
}

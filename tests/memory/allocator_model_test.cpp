// The CUDA caching allocator model against hand-computed cases (c10/cuda/CUDACachingAllocator.cpp
// defaults), and the exact model of the CPU budget.
#include "saturate/memory/allocator_model.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {
constexpr int64_t KiB = 1024, MiB = 1024 * 1024;
}

TEST(AllocatorModelTest, RequestsRoundUpToMultiplesOf512Bytes) {
  EXPECT_EQ(cuda_round_size(0), 512);
  EXPECT_EQ(cuda_round_size(1), 512);
  EXPECT_EQ(cuda_round_size(512), 512);
  EXPECT_EQ(cuda_round_size(513), 1024);
  EXPECT_EQ(cuda_round_size(400000), 400384);  // 782 x 512
  EXPECT_EQ(cuda_round_size(MiB), MiB);
}

TEST(AllocatorModelTest, SegmentSizesFollowThePoolRules) {
  EXPECT_EQ(cuda_segment_size(512), 2 * MiB);              // small pool
  EXPECT_EQ(cuda_segment_size(MiB), 2 * MiB);              // 1 MiB is still small
  EXPECT_EQ(cuda_segment_size(MiB + 512), 20 * MiB);       // large, under 10 MiB
  EXPECT_EQ(cuda_segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(cuda_segment_size(10 * MiB), 10 * MiB);        // from 10 MiB: rounded to 2 MiB
  EXPECT_EQ(cuda_segment_size(10 * MiB + 512), 12 * MiB);
  EXPECT_EQ(cuda_segment_size(21 * MiB), 22 * MiB);
}

TEST(AllocatorModelTest, SmallRequestsShareOneTwoMebibyteSegment) {
  AllocatorModel m(AllocatorKind::kCudaCaching);
  for (uint64_t id = 0; id < 5; ++id) ASSERT_TRUE(m.malloc(id, 400000));  // 5 x 400384 = 2001920 <= 2 MiB
  EXPECT_EQ(m.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 5 * 400384);
  ASSERT_TRUE(m.malloc(5, 400000));  // 95232 B left: a second segment
  EXPECT_EQ(m.reserved_bytes(), 4 * MiB);
  EXPECT_EQ(m.segment_count(), 2);
}

TEST(AllocatorModelTest, LargeRequestsSplitATwentyMebibyteSegmentAndReuseItWhenFree) {
  AllocatorModel m(AllocatorKind::kCudaCaching);
  ASSERT_TRUE(m.malloc(1, 5 * MiB));
  ASSERT_TRUE(m.malloc(2, 5 * MiB));  // the 15 MiB rest of the first segment
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 10 * MiB);
  m.free(1);
  m.free(2);  // merged back into one 20 MiB free block
  EXPECT_EQ(m.allocated_bytes(), 0);
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);  // cached, not returned
  ASSERT_TRUE(m.malloc(3, 12 * MiB));
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(m.peak_reserved_bytes(), 20 * MiB);
}

TEST(AllocatorModelTest, ALargeBlockIsNotSplitWhenTheRestIsOneMebibyteOrLess) {
  AllocatorModel m(AllocatorKind::kCudaCaching);
  ASSERT_TRUE(m.malloc(1, 19 * MiB + 1));  // block 19 MiB + 512 B; segment rounded up to 20 MiB
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
  EXPECT_EQ(m.allocated_bytes(), 20 * MiB);  // the rest (< 1 MiB) stays in the block
  m.free(1);
  ASSERT_TRUE(m.malloc(2, 18 * MiB));  // rest 2 MiB > 1 MiB: split
  EXPECT_EQ(m.allocated_bytes(), 18 * MiB);
  ASSERT_TRUE(m.malloc(3, 2 * MiB));  // 2 MiB is large: fits the split-off 2 MiB block
  EXPECT_EQ(m.reserved_bytes(), 20 * MiB);
}

TEST(AllocatorModelTest, AtCapacityTheCacheIsFreedOnceThenItRunsOutOfMemory) {
  AllocatorModel m(AllocatorKind::kCudaCaching, 30 * MiB);
  ASSERT_TRUE(m.malloc(1, 12 * MiB));
  m.free(1);                           // 12 MiB cached
  ASSERT_TRUE(m.malloc(2, 14 * MiB));  // does not fit the cached block: 12 + 14 = 26 MiB reserved
  EXPECT_EQ(m.reserved_bytes(), 26 * MiB);
  ASSERT_TRUE(m.malloc(3, 16 * MiB));  // 42 > 30: the free 12 MiB segment goes, 14 + 16 = 30 fits
  EXPECT_EQ(m.reserved_bytes(), 30 * MiB);
  EXPECT_FALSE(m.malloc(4, 2 * MiB));  // a 20 MiB segment; nothing left to free
  EXPECT_EQ(m.allocated_bytes(), 30 * MiB);
  EXPECT_EQ(m.peak_reserved_bytes(), 30 * MiB);
}

TEST(AllocatorModelTest, ExactModelCountsRequestedBytesAgainstTheCapacity) {
  AllocatorModel m(AllocatorKind::kExact, 10 * KiB);
  ASSERT_TRUE(m.malloc(1, 6 * KiB));
  EXPECT_FALSE(m.malloc(2, 5 * KiB));
  ASSERT_TRUE(m.malloc(3, 4 * KiB));
  EXPECT_EQ(m.allocated_bytes(), 10 * KiB);
  m.free(1);
  EXPECT_EQ(m.reserved_bytes(), 4 * KiB);
  EXPECT_EQ(m.peak_allocated_bytes(), 10 * KiB);
}

TEST(AllocatorModelTest, AllocatorKindsParseAndPrint) {
  EXPECT_EQ(parse_allocator_kind("exact"), AllocatorKind::kExact);
  EXPECT_EQ(parse_allocator_kind("cuda-caching"), AllocatorKind::kCudaCaching);
  EXPECT_EQ(to_string(AllocatorKind::kCudaCaching), "cuda-caching");
  ASSERT_THROWS_WITH(parse_allocator_kind("slab"), UsageError, "expected cuda-caching or exact");
}

// Implements: a model of how an allocator turns requests into held memory, to replay a recorded
// step for a device that is not here.
//  - exact: bytes as requested, nothing cached (the CPU budget allocator).
//  - cuda-caching: PyTorch's CUDA caching allocator with its default settings
//    (c10/cuda/CUDACachingAllocator.cpp): requests round up to 512 bytes; requests up to 1 MiB
//    come from 2 MiB segments (small pool), requests under 10 MiB from 20 MiB segments, larger
//    ones from segments rounded up to 2 MiB; freed blocks are cached and reused best-fit
//    (smallest block that fits), split when the rest is >= 512 B (small pool) or > 1 MiB (large
//    pool) and merged with free neighbours; when a new segment would pass the capacity, the
//    allocator frees its fully free cached segments and tries once more, then runs out of memory.
// No LibTorch.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace saturate {

enum class AllocatorKind { kExact, kCudaCaching };
/// "exact" | "cuda-caching".
std::string to_string(AllocatorKind k);
/// "exact" | "cuda-caching" (also "cpu", "cuda"); throws UsageError about `option` otherwise.
AllocatorKind parse_allocator_kind(const std::string& text, const std::string& option = "plan_allocator");

constexpr int64_t kCudaMinBlockBytes = 512;
constexpr int64_t kCudaSmallRequestBytes = int64_t{1} << 20;     ///< up to this: small pool
constexpr int64_t kCudaSmallSegmentBytes = int64_t{2} << 20;
constexpr int64_t kCudaMinLargeAllocBytes = int64_t{10} << 20;   ///< under this: a 20 MiB segment
constexpr int64_t kCudaLargeSegmentBytes = int64_t{20} << 20;
constexpr int64_t kCudaRoundLargeBytes = int64_t{2} << 20;

/// A request's block size: at least 512 B, a multiple of 512 B.
int64_t cuda_round_size(int64_t bytes);
/// The segment cudaMalloc'ed for a block of `rounded_bytes` when no cached block fits.
int64_t cuda_segment_size(int64_t rounded_bytes);

class AllocatorModel {
 public:
  /// `capacity_bytes` 0: unlimited.
  explicit AllocatorModel(AllocatorKind kind, int64_t capacity_bytes = 0);
  /// Allocates `bytes` under `id`; false when it runs out of memory (nothing is allocated then).
  bool malloc(uint64_t id, int64_t bytes);
  /// Frees `id` (ignored when unknown).
  void free(uint64_t id);
  /// Hands fully free cached segments back (torch.cuda.empty_cache()).
  void empty_cache();

  int64_t allocated_bytes() const { return allocated_; }
  int64_t reserved_bytes() const { return reserved_; }
  int64_t peak_allocated_bytes() const { return peak_allocated_; }
  int64_t peak_reserved_bytes() const { return peak_reserved_; }
  int64_t segment_count() const { return static_cast<int64_t>(segments_.size()); }

 private:
  struct Block {
    int64_t size = 0;
    bool used = false;
  };
  struct Segment {
    int64_t size = 0;
    bool small = false;
    std::map<int64_t, Block> blocks;  ///< by offset
  };
  using FreeKey = std::tuple<int64_t, int64_t, int64_t>;  ///< size, segment, offset
  bool find_block(bool small, int64_t size, int64_t* segment, int64_t* offset);
  void take(int64_t segment, int64_t offset, int64_t size, uint64_t id);
  void note_peaks();

  AllocatorKind kind_;
  int64_t capacity_;
  int64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  int64_t next_segment_ = 0;
  std::map<int64_t, Segment> segments_;
  std::set<FreeKey> free_small_, free_large_;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> live_;  ///< id -> segment, offset
  std::unordered_map<uint64_t, int64_t> exact_;                     ///< id -> bytes (exact kind)
};

}  // namespace saturate

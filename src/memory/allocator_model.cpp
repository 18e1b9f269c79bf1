#include "saturate/memory/allocator_model.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::string to_string(AllocatorKind k) { return k == AllocatorKind::kExact ? "exact" : "cuda-caching"; }

AllocatorKind parse_allocator_kind(const std::string& text, const std::string& option) {
  if (text == "exact" || text == "cpu") return AllocatorKind::kExact;
  if (text == "cuda-caching" || text == "cuda") return AllocatorKind::kCudaCaching;
  throw UsageError(option, fmt::format("unknown value '{}' (expected cuda-caching or exact)", text));
}

int64_t cuda_round_size(int64_t bytes) {
  if (bytes < kCudaMinBlockBytes) return kCudaMinBlockBytes;
  return kCudaMinBlockBytes * ((bytes + kCudaMinBlockBytes - 1) / kCudaMinBlockBytes);
}

int64_t cuda_segment_size(int64_t rounded) {
  if (rounded <= kCudaSmallRequestBytes) return kCudaSmallSegmentBytes;
  if (rounded < kCudaMinLargeAllocBytes) return kCudaLargeSegmentBytes;
  return kCudaRoundLargeBytes * ((rounded + kCudaRoundLargeBytes - 1) / kCudaRoundLargeBytes);
}

AllocatorModel::AllocatorModel(AllocatorKind kind, int64_t capacity_bytes) : kind_(kind), capacity_(capacity_bytes) {}

void AllocatorModel::note_peaks() {
  if (allocated_ > peak_allocated_) peak_allocated_ = allocated_;
  if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
}

bool AllocatorModel::find_block(bool small, int64_t size, int64_t* segment, int64_t* offset) {
  std::set<FreeKey>& pool = small ? free_small_ : free_large_;
  auto it = pool.lower_bound(FreeKey{size, -1, -1});
  if (it == pool.end()) return false;
  *segment = std::get<1>(*it);
  *offset = std::get<2>(*it);
  return true;
}

void AllocatorModel::take(int64_t seg_id, int64_t offset, int64_t size, uint64_t id) {
  Segment& seg = segments_.at(seg_id);
  std::set<FreeKey>& pool = seg.small ? free_small_ : free_large_;
  Block& b = seg.blocks.at(offset);
  pool.erase(FreeKey{b.size, seg_id, offset});
  const int64_t rest = b.size - size;
  const bool split = seg.small ? rest >= kCudaMinBlockBytes : rest > kCudaSmallRequestBytes;
  if (split) {
    b.size = size;
    seg.blocks[offset + size] = Block{rest, false};
    pool.insert(FreeKey{rest, seg_id, offset + size});
  }
  b.used = true;
  allocated_ += b.size;  // the block, not the request: what torch's allocated_bytes counts
  live_[id] = {seg_id, offset};
}

bool AllocatorModel::malloc(uint64_t id, int64_t bytes) {
  if (kind_ == AllocatorKind::kExact) {
    if (capacity_ > 0 && allocated_ + bytes > capacity_) return false;
    allocated_ += bytes;
    reserved_ = allocated_;
    exact_[id] = bytes;
    note_peaks();
    return true;
  }
  const int64_t size = cuda_round_size(bytes);
  const bool small = size <= kCudaSmallRequestBytes;
  int64_t seg = 0, off = 0;
  if (!find_block(small, size, &seg, &off)) {
    const int64_t seg_bytes = cuda_segment_size(size);
    if (capacity_ > 0 && reserved_ + seg_bytes > capacity_) {
      empty_cache();  // as the real allocator does before giving up
      if (reserved_ + seg_bytes > capacity_) return false;
    }
    seg = next_segment_++;
    Segment s;
    s.size = seg_bytes;
    s.small = small;
    s.blocks[0] = Block{seg_bytes, false};
    segments_[seg] = std::move(s);
    (small ? free_small_ : free_large_).insert(FreeKey{seg_bytes, seg, 0});
    reserved_ += seg_bytes;
    off = 0;
  }
  take(seg, off, size, id);
  note_peaks();
  return true;
}

void AllocatorModel::free(uint64_t id) {
  if (kind_ == AllocatorKind::kExact) {
    auto it = exact_.find(id);
    if (it == exact_.end()) return;
    allocated_ -= it->second;
    reserved_ = allocated_;
    exact_.erase(it);
    return;
  }
  auto it = live_.find(id);
  if (it == live_.end()) return;
  const auto [seg_id, offset] = it->second;
  live_.erase(it);
  Segment& seg = segments_.at(seg_id);
  std::set<FreeKey>& pool = seg.small ? free_small_ : free_large_;
  auto b = seg.blocks.find(offset);
  allocated_ -= b->second.size;
  b->second.used = false;
  // merge with a free successor, then with a free predecessor.
  auto next = std::next(b);
  if (next != seg.blocks.end() && !next->second.used) {
    pool.erase(FreeKey{next->second.size, seg_id, next->first});
    b->second.size += next->second.size;
    seg.blocks.erase(next);
  }
  if (b != seg.blocks.begin()) {
    auto prev = std::prev(b);
    if (!prev->second.used) {
      pool.erase(FreeKey{prev->second.size, seg_id, prev->first});
      prev->second.size += b->second.size;
      seg.blocks.erase(b);
      b = prev;
    }
  }
  pool.insert(FreeKey{b->second.size, seg_id, b->first});
}

void AllocatorModel::empty_cache() {
  if (kind_ == AllocatorKind::kExact) return;
  for (auto it = segments_.begin(); it != segments_.end();) {
    const Segment& s = it->second;
    if (s.blocks.size() == 1 && !s.blocks.begin()->second.used) {
      (s.small ? free_small_ : free_large_).erase(FreeKey{s.size, it->first, 0});
      reserved_ -= s.size;
      it = segments_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace saturate

#include "saturate/memory/plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {

const std::vector<GpuCard>& known_gpu_cards() {
  constexpr int64_t MiB = int64_t{1} << 20;
  static const std::vector<GpuCard> cards = {
      {"rtx4090", 24564 * MiB},   {"a100-40gb", 40960 * MiB}, {"a100-80gb", 81920 * MiB},
      {"h100-80gb", 81559 * MiB}, {"h200", 143771 * MiB},
  };
  return cards;
}

PlanTarget parse_plan_target(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const GpuCard& c : known_gpu_cards())
    if (lower == c.name) return {c.name, c.memory_bytes};
  std::string names;
  for (const GpuCard& c : known_gpu_cards()) names += (names.empty() ? "" : ", ") + c.name;
  const bool looks_numeric = !lower.empty() && (std::isdigit(static_cast<unsigned char>(lower[0])) || lower[0] == '.');
  if (!looks_numeric)
    throw UsageError("plan_for", fmt::format("unknown card '{}' (expected {}, or a size such as 24GiB)", text, names));
  MemorySize size;
  try {
    size = parse_memory_size(text, "the card's memory");
  } catch (const UsageError& e) {
    throw UsageError("plan_for", e.what());
  }
  if (size.is_fraction())
    throw UsageError("plan_for", fmt::format("{}: give the card's memory as a size such as 24GiB, or a card ({})", text,
                                             names));
  if (size.bytes < (int64_t{1} << 20))
    throw UsageError("plan_for", fmt::format("{}: too small for a GPU; give e.g. 24GiB", text));
  return {text, size.bytes};
}

AllocationTrace trace_from_log(const MemoryEventLog& log, int64_t batch, std::vector<int64_t> resident_tensor_bytes) {
  AllocationTrace t;
  t.batch = batch;
  int64_t sum = 0;
  for (int64_t b : resident_tensor_bytes) sum += b;
  t.resident_bytes = std::move(resident_tensor_bytes);
  if (log.start_allocated_bytes > sum) t.resident_bytes.push_back(log.start_allocated_bytes - sum);
  std::unordered_map<uint64_t, uint32_t> live;
  uint32_t next = 0;
  for (const MemoryEvent& e : log.events) {
    if (e.kind == MemoryEvent::kAlloc) {
      live[e.address] = next;
      t.ops.push_back({true, next++, e.bytes});
    } else if (e.kind == MemoryEvent::kFree) {
      auto it = live.find(e.address);
      if (it == live.end()) continue;
      t.ops.push_back({false, it->second, e.bytes});
      live.erase(it);
    }
  }
  return t;
}

bool traces_align(const AllocationTrace& a, const AllocationTrace& b) {
  if (a.ops.size() != b.ops.size() || a.resident_bytes.size() != b.resident_bytes.size()) return false;
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (a.ops[i].alloc != b.ops[i].alloc || a.ops[i].id != b.ops[i].id) return false;
  return true;
}

AllocationTrace interpolate_trace(const AllocationTrace& a, const AllocationTrace& b, int64_t batch) {
  if (!traces_align(a, b))
    throw RuntimeFailure(fmt::format(
        "plan: the steps recorded at batch {} and {} made different allocations ({} vs {} events), so sizes cannot "
        "be followed from one batch to the other; try other `plan_batches`",
        a.batch, b.batch, a.ops.size(), b.ops.size()));
  if (a.batch == b.batch) throw InternalError("plan: the two recorded batches must differ");
  AllocationTrace t;
  t.batch = batch;
  const double f = static_cast<double>(batch - a.batch) / static_cast<double>(b.batch - a.batch);
  const auto line = [&](int64_t x, int64_t y) {
    return std::max<int64_t>(0, static_cast<int64_t>(std::llround(static_cast<double>(x) + f * static_cast<double>(y - x))));
  };
  t.resident_bytes.resize(a.resident_bytes.size());
  for (size_t i = 0; i < a.resident_bytes.size(); ++i) t.resident_bytes[i] = line(a.resident_bytes[i], b.resident_bytes[i]);
  t.ops.resize(a.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) t.ops[i] = {a.ops[i].alloc, a.ops[i].id, line(a.ops[i].bytes, b.ops[i].bytes)};
  return t;
}

ReplayResult replay_trace(const AllocationTrace& t, AllocatorKind kind, int64_t capacity_bytes) {
  AllocatorModel m(kind, capacity_bytes);
  ReplayResult r;
  constexpr uint64_t kResident = uint64_t{1} << 40;
  for (size_t i = 0; i < t.resident_bytes.size() && !r.oom; ++i) r.oom = !m.malloc(kResident + i, t.resident_bytes[i]);
  if (kind == AllocatorKind::kCudaCaching && !r.oom) r.oom = !m.malloc(kResident - 1, kCudaWorkspaceBytes);
  for (size_t i = 0; i < t.ops.size() && !r.oom; ++i) {
    if (t.ops[i].alloc) r.oom = !m.malloc(t.ops[i].id, t.ops[i].bytes);
    else m.free(t.ops[i].id);
  }
  r.peak_allocated_bytes = m.peak_allocated_bytes();
  r.peak_reserved_bytes = m.peak_reserved_bytes();
  return r;
}

namespace {

/// Largest batch in [1, limit] whose replay fits in `allocator_limit`; 0 when batch 1 does not.
int64_t largest_fitting(const AllocationTrace& a, const AllocationTrace& b, AllocatorKind kind, int64_t allocator_limit,
                        int64_t limit, bool* limited) {
  const auto fits = [&](int64_t batch) {
    return allocator_limit > 0 && !replay_trace(interpolate_trace(a, b, batch), kind, allocator_limit).oom;
  };
  *limited = false;
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi <= limit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > limit) {
    if (fits(limit)) {
      *limited = true;
      return limit;
    }
    hi = limit;
  }
  while (hi - lo > 1) {  // lo fits, hi does not
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

PlanResult plan_batch(const AllocationTrace& a, const AllocationTrace& b, const PlanOptions& o) {
  if (!(o.target_fraction > 0 && o.target_fraction <= 1))
    throw UsageError("target_fraction", fmt::format("{} is outside (0, 1]", o.target_fraction));
  if (!traces_align(a, b)) (void)interpolate_trace(a, b, 1);  // throws with the explanation
  PlanResult p;
  p.allocator = o.allocator;
  p.capacity_bytes = o.capacity_bytes;
  p.target_fraction = o.target_fraction;
  p.target_bytes = static_cast<int64_t>(std::floor(o.target_fraction * static_cast<double>(o.capacity_bytes)));
  const bool cuda = o.allocator == AllocatorKind::kCudaCaching;
  p.context_bytes = o.context_bytes >= 0 ? o.context_bytes : (cuda ? kCudaContextBytes : 0);
  p.workspace_bytes = cuda ? kCudaWorkspaceBytes : 0;
  p.traced_batches = {a.batch, b.batch};
  // the allocator may hold what the context leaves; the recommended batch, at most the target
  // (as a search on that card would run it, under the allocator's memory fraction).
  const int64_t usable = o.capacity_bytes - p.context_bytes;
  const int64_t target_limit = std::min(p.target_bytes, usable);
  bool limited = false, unused = false;
  p.max_batch = largest_fitting(a, b, o.allocator, usable, o.batch_limit, &limited);
  p.batch_limited = limited;
  p.recommended_batch = std::min(p.max_batch, largest_fitting(a, b, o.allocator, target_limit, o.batch_limit, &unused));
  // the peaks as a run under each limit would see them: at the limit the cache is released.
  if (p.recommended_batch > 0)
    p.predicted_peak_bytes =
        replay_trace(interpolate_trace(a, b, p.recommended_batch), o.allocator, target_limit).peak_reserved_bytes;
  if (p.max_batch > 0)
    p.predicted_max_peak_bytes = replay_trace(interpolate_trace(a, b, p.max_batch), o.allocator, usable).peak_reserved_bytes;
  p.method = fmt::format(
      "one training step recorded at batch {} and {}; each allocation's size followed as a line in the batch; "
      "replayed through the {} allocator model{}",
      a.batch, b.batch, to_string(o.allocator),
      cuda ? fmt::format(" (512 B rounding, 2/20 MiB segments, best-fit cache), plus {} CUDA context outside the "
                         "allocator and {} cuBLAS workspace inside it",
                         format_bytes(p.context_bytes), format_bytes(p.workspace_bytes))
           : " (bytes as requested, no cache)");
  return p;
}

nlohmann::json plan_json(const PlanResult& p) {
  return {{"prediction", true},
          {"target", p.target},
          {"allocator", to_string(p.allocator)},
          {"capacity_bytes", p.capacity_bytes},
          {"target_fraction", p.target_fraction},
          {"target_bytes", p.target_bytes},
          {"context_bytes", p.context_bytes},
          {"workspace_bytes", p.workspace_bytes},
          {"max_batch", p.max_batch},
          {"recommended_batch", p.recommended_batch},
          {"predicted_peak_bytes", p.predicted_peak_bytes},
          {"predicted_max_peak_bytes", p.predicted_max_peak_bytes},
          {"batch_limited", p.batch_limited},
          {"traced_batches", p.traced_batches},
          {"device_here", p.device_here},
          {"method", p.method}};
}

}  // namespace saturate

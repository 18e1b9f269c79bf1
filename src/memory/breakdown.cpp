#include "saturate/memory/breakdown.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "memory/log_replay.h"
#include "saturate/core/units.h"

namespace saturate {
namespace detail {

LogReplay replay_log(const MemoryEventLog& log) {
  const size_t n = log.events.size();
  LogReplay r;
  r.allocated_after.resize(n);
  r.baseline_after.resize(n);
  r.freed_at.assign(n, kNever);
  r.region.resize(n);

  // where each phase instance ends: the next end mark of the same phase and step.
  std::vector<size_t> end_of(log.marks.size(), kNever);
  for (size_t m = 0; m < log.marks.size(); ++m) {
    if (!log.marks[m].begin) continue;
    for (size_t k = m + 1; k < log.marks.size(); ++k)
      if (!log.marks[k].begin && log.marks[k].phase == log.marks[m].phase && log.marks[k].step == log.marks[m].step) {
        end_of[m] = log.marks[k].event_index;
        break;
      }
  }
  std::vector<size_t> open;  // indices of open begin marks, innermost last
  int step = -1;
  bool seen_step = false;
  size_t next_mark = 0;
  std::unordered_map<uint64_t, size_t> live;
  int64_t allocated = log.start_allocated_bytes;
  int64_t baseline = log.start_allocated_bytes;
  for (size_t i = 0; i < n; ++i) {
    for (; next_mark < log.marks.size() && log.marks[next_mark].event_index <= i; ++next_mark) {
      const PhaseMark& m = log.marks[next_mark];
      if (m.phase == "step") {
        seen_step = true;
        step = m.begin ? m.step : step;
        continue;
      }
      if (m.begin) {
        open.push_back(next_mark);
      } else {
        for (size_t k = open.size(); k-- > 0;)
          if (log.marks[open[k]].phase == m.phase && log.marks[open[k]].step == m.step) {
            open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
            break;
          }
      }
    }
    EventRegion& reg = r.region[i];
    if (!open.empty()) {
      const PhaseMark& m = log.marks[open.back()];
      reg.phase = m.phase;
      reg.step = m.step;
      reg.phase_end = end_of[open.back()];
    } else {
      reg.phase = seen_step ? "step" : "setup";
      reg.step = seen_step ? step : -1;
    }
    const MemoryEvent& e = log.events[i];
    if (e.kind == MemoryEvent::kAlloc) {
      allocated += e.bytes;
      live[e.address] = i;
    } else if (e.kind == MemoryEvent::kFree) {
      allocated -= e.bytes;
      auto it = live.find(e.address);
      if (it != live.end()) {
        r.freed_at[it->second] = i;
        live.erase(it);
      } else {
        baseline -= e.bytes;  // made before the log started
      }
    }
    r.allocated_after[i] = allocated;
    r.baseline_after[i] = baseline;
  }
  return r;
}

std::string part_of(const EventRegion& r, size_t freed_at) {
  const bool kept = freed_at == kNever || (r.phase_end != kNever && freed_at >= r.phase_end);
  if (r.phase == "setup" || r.phase == "inputs" || r.phase == "data_wait" || r.phase == "h2d") return "inputs";
  if (r.phase == "forward") return "activations";
  // regions a sharded step's collectives are marked with (python/saturate/_phases.py)
  if (r.phase == "communication" || r.phase == "gathered_parameters") return r.phase;
  if (r.phase == "backward") return kept ? "gradients" : "workspace";
  if (r.phase == "optimizer") return kept ? "optimizer_state" : "workspace";
  return "workspace";
}

}  // namespace detail

namespace {

std::vector<LiveAllocation> live_at(const MemoryEventLog& log, const detail::LogReplay& r, size_t index) {
  std::vector<LiveAllocation> out;
  for (size_t i = 0; i <= index && i < log.events.size(); ++i) {
    const MemoryEvent& e = log.events[i];
    if (e.kind != MemoryEvent::kAlloc) continue;
    if (r.freed_at[i] != detail::kNever && r.freed_at[i] <= index) continue;
    out.push_back({e.bytes, detail::part_of(r.region[i], r.freed_at[i]), r.region[i].phase, r.region[i].step, i});
  }
  return out;
}

}  // namespace

std::vector<LiveAllocation> live_allocations(const MemoryEventLog& log, size_t event_index) {
  return live_at(log, detail::replay_log(log), event_index);
}

MemoryBreakdown analyze_memory(const MemoryEventLog& log, int64_t parameters_bytes, size_t top_n) {
  MemoryBreakdown b;
  b.source = log.source;
  b.truncated = log.truncated;
  const detail::LogReplay r = detail::replay_log(log);
  b.peak_allocated_bytes = log.start_allocated_bytes;
  int64_t baseline = log.start_allocated_bytes;
  bool any = false;
  for (size_t i = 0; i < r.allocated_after.size(); ++i)
    if (r.allocated_after[i] > b.peak_allocated_bytes) {
      b.peak_allocated_bytes = r.allocated_after[i];
      b.peak_event_index = i;
      baseline = r.baseline_after[i];
      any = true;
    }
  b.parameters_bytes = parameters_bytes;
  b.other_bytes = baseline - parameters_bytes;
  if (any) {
    b.peak_step = r.region[b.peak_event_index].step;
    b.peak_phase = r.region[b.peak_event_index].phase;
    std::vector<LiveAllocation> live = live_at(log, r, b.peak_event_index);
    for (const LiveAllocation& a : live) {
      if (a.part == "inputs") b.inputs_bytes += a.bytes;
      else if (a.part == "activations") b.activations_bytes += a.bytes;
      else if (a.part == "gradients") b.gradients_bytes += a.bytes;
      else if (a.part == "optimizer_state") b.optimizer_state_bytes += a.bytes;
      else if (a.part == "communication") b.communication_bytes += a.bytes;
      else if (a.part == "gathered_parameters") b.gathered_parameters_bytes += a.bytes;
      else b.workspace_bytes += a.bytes;
    }
    std::sort(live.begin(), live.end(), [](const LiveAllocation& x, const LiveAllocation& y) {
      return x.bytes != y.bytes ? x.bytes > y.bytes : x.event_index < y.event_index;
    });
    if (live.size() > top_n) live.resize(top_n);
    b.largest_at_peak = std::move(live);
  }
  // what the last complete forward pass left live at its end: the activations saved for backward.
  for (size_t m = log.marks.size(); m-- > 0;) {
    const PhaseMark& end = log.marks[m];
    if (end.begin || end.phase != "forward") continue;
    for (size_t k = m; k-- > 0;) {
      const PhaseMark& begin = log.marks[k];
      if (!begin.begin || begin.phase != "forward" || begin.step != end.step) continue;
      for (size_t i = begin.event_index; i < end.event_index && i < log.events.size(); ++i)
        if (log.events[i].kind == MemoryEvent::kAlloc && (r.freed_at[i] == detail::kNever || r.freed_at[i] >= end.event_index))
          b.saved_for_backward_bytes += log.events[i].bytes;
      break;
    }
    break;
  }
  b.peak_reserved_bytes = std::max(b.peak_allocated_bytes, log.peak_reserved_bytes);
  b.allocator_overhead_bytes = b.peak_reserved_bytes - b.peak_allocated_bytes;
  return b;
}

}  // namespace saturate

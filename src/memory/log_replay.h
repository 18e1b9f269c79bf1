// Private: one pass over an allocation log that the breakdown and the timeline share: the
// allocated bytes after each event, the phase each event happened in, and when each allocation
// was freed.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "saturate/memory/events.h"

namespace saturate::detail {

constexpr size_t kNever = std::numeric_limits<size_t>::max();

struct EventRegion {
  std::string phase;         ///< innermost open phase; "setup" before the first step, "step" between phases
  int step = -1;
  size_t phase_end = kNever;  ///< event index at which that phase instance ended
};

struct LogReplay {
  std::vector<int64_t> allocated_after;  ///< live bytes after each event
  std::vector<size_t> freed_at;          ///< for an allocation: the index of its free (kNever: kept)
  std::vector<int64_t> baseline_after;   ///< bytes live since before the log, after each event
  std::vector<EventRegion> region;
};

LogReplay replay_log(const MemoryEventLog& log);

/// The part an allocation belongs to, from where it was made and whether it outlived its phase.
std::string part_of(const EventRegion& r, size_t freed_at);

}  // namespace saturate::detail

// Implements: the memory timeline of one training step: allocated bytes over time with the
// phases marked (forward / backward / optimizer) and the largest live allocations at the peak;
// written as JSON or as an SVG plot. No LibTorch.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/memory/breakdown.h"
#include "saturate/memory/events.h"

namespace saturate {

struct TimelinePoint {
  double time_ms = 0;  ///< since the step began
  int64_t allocated_bytes = 0;
};

struct TimelinePhase {
  std::string phase;
  double begin_ms = 0, end_ms = 0;
};

struct Timeline {
  int step = -1;
  std::string source;
  double duration_ms = 0;
  std::vector<TimelinePoint> points;  ///< one per allocation event (and the start)
  std::vector<TimelinePhase> phases;
  std::vector<double> oom_ms;         ///< refused allocations (out of memory)
  int64_t start_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  double peak_ms = 0;
  std::string peak_phase;
  std::vector<LiveAllocation> largest_at_peak;
  /// For PyTorch's memory snapshot (memory/snapshot.h): the allocations live when the window
  /// began (address and bytes; what was live before the log began, without an address, at 0), and
  /// the window's events with its start time.
  std::vector<std::pair<uint64_t, int64_t>> live_at_start;
  std::vector<MemoryEvent> events;
  int64_t start_time_ns = 0;
};

/// The timeline of `step` in `log` (-1: the last step that has a begin and an end mark; when
/// there is none, the whole log). Throws UsageError when `step` is not in the log.
Timeline build_timeline(const MemoryEventLog& log, int step = -1, size_t top_n = 10);

nlohmann::json timeline_json(const Timeline& t);
/// A self-contained SVG line plot (MiB over ms) with the phases shaded and the peak marked.
std::string timeline_svg(const Timeline& t, const std::string& title);

/// Writes the timeline to `path`: SVG when it ends in .svg, PyTorch's memory snapshot when it ends
/// in .pickle (memory/snapshot.h: pytorch.org/memory_viz reads it), else JSON (write_output_file: atomic
/// for a regular file, a FIFO or a device in place). Throws RuntimeFailure when the file cannot
/// be written.
void write_timeline(const Timeline& t, const std::string& path, const std::string& title);

}  // namespace saturate

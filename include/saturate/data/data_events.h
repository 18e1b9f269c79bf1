// Implements: what opening the data and attaching its loader report as they go (all optional):
// the dataset opened, and `workers` auto's timed counts and choice. Emitted by session/'s data
// set-up; report/progress_lines.h turns them into lines.
#pragma once
#include <functional>

#include "saturate/data/dataset.h"
#include "saturate/probe/findings.h"

namespace saturate {

/// What attaching the loader reports as it goes (all optional).
struct DataEvents {
  std::function<void(const Dataset&)> on_open;
  std::function<void(const WorkerCurvePoint&)> on_workers_point;  ///< `workers` auto, each count timed
  std::function<void(const WorkerTuning&)> on_workers_chosen;
};

}  // namespace saturate

// Implements: a leak check over a run of training steps on a workload: the bytes allocated after
// each step go through the LeakDetector. `keep_loss_graph` makes the run leak on purpose, as a
// loop that keeps every step's loss (backward with retain_graph, the loss appended to a list)
// does: each step's graph, with the tensors it saved for backward, stays alive.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/memory/leak_detector.h"
#include "saturate/probe/workload.h"

namespace saturate {

struct LeakCheckOptions {
  int64_t batch = 8;
  int steps = 50;
  bool keep_loss_graph = false;  ///< the deliberate leak
  LeakOptions leak;
};

struct LeakCheckResult {
  LeakReport report;
  std::vector<int64_t> allocated_after_step_bytes;
  int oom_step = -1;  ///< the step that ran out of memory (the run stops there); -1: none
  std::string error;
  double seconds = 0;
};

/// For a training loop (saturate train's TrainOptions::on_step): after each step, the meter's
/// allocated bytes go to a LeakDetector; the first time a leak is seen, a one-line warning comes
/// back (once per run), else an empty string.
class LeakWatch {
 public:
  explicit LeakWatch(MemoryMeter& meter, LeakOptions options = {});
  std::string after_step(int64_t step);
  LeakReport report() const { return detector_.report(); }

 private:
  MemoryMeter& meter_;
  LeakDetector detector_;
};

/// Runs the steps; an out-of-memory ends the run early and is reported, not thrown. Everything
/// the run made is released before it returns.
LeakCheckResult run_leak_check(Workload& workload, MemoryMeter& meter, const LeakCheckOptions& options);

}  // namespace saturate

// Implements: the seams of a probe that other parts plug into without editing the probe.
//  - ProbeObserver: told when a trial, a step and each phase of a step begin and end; adds its
//    findings (phase times, utilization, memory breakdown, ...) to the trial's `extra` JSON.
//  - BatchSource: where a trial's batches come from (default: one synthetic batch, made once);
//    a data loader plugs in here, and the time spent waiting for it is the data_wait phase.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "saturate/probe/workload.h"
#include "saturate/search/trial.h"

namespace saturate {

enum class Phase { kDataWait, kHostToDevice, kForward, kBackward, kOptimizer, kAllreduce };
/// "data_wait", "h2d", "forward", "backward", "optimizer", "allreduce" (the JSON names).
std::string to_string(Phase p);

class ProbeObserver {
 public:
  virtual ~ProbeObserver() = default;
  virtual void trial_begin(int64_t batch) {}
  /// `measured` is false for warm-up steps.
  virtual void step_begin(int step, bool measured) {}
  virtual void phase_begin(Phase phase) {}
  virtual void phase_end(Phase phase) {}
  virtual void step_end(int step, bool measured) {}
  /// After the trial was cleaned up; write findings into `trial.extra` (a JSON object).
  /// After an OOM, a phase_begin may have no phase_end: the step ended with the exception.
  virtual void trial_end(Trial& trial) {}
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// The next batch of `batch` samples, on the workload's device. May block (data wait).
  virtual Batch next(int64_t batch) = 0;
  /// Called when a trial starts, so a source can restart its epoch or resize its batches.
  virtual void reset(int64_t batch) {}
};

}  // namespace saturate

// Implements: the seams of a probe that other parts plug into without editing the probe.
//  - ProbeObserver: told when a trial, a step and each phase of a step begin and end; adds its
//    findings (phase times, utilization, memory breakdown, ...) to the trial's `findings`.
//  - BatchSource: where a trial's batches come from (default: one synthetic batch, made once);
//    a data loader plugs in here, and the time spent waiting for it is the data_wait phase.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/step/phase_observer.h"
#include "saturate/step/workload.h"
#include "saturate/probe/trial.h"

namespace saturate {

/// The step and phase hooks come from PhaseObserver (phase_observer.h), shared with the Trainer.
class ProbeObserver : public PhaseObserver {
 public:
  virtual void trial_begin(int64_t batch) {}
  /// After the trial was cleaned up; fill in its part of `trial.findings` (findings.h).
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

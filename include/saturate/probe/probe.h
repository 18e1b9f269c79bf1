// Implements: running one training configuration safely and measuring it (a trial).
// Warm-up steps, then timed full training steps (forward, loss, backward, optimizer step) with
// device synchronisation; the median step time, samples/s and peak allocated/reserved bytes.
// An out-of-memory is a result: everything the trial allocated is released (optimizer state,
// gradients, the batch, the autograd graph), memory returns to the pre-trial baseline and the
// process stays healthy for the next trial.
#pragma once
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/step/workload.h"
#include "saturate/probe/trial.h"
#include "saturate/step/activation_checkpoint.h"

namespace saturate {

class Probe final : public TrialRunner {
 public:
  Probe(Workload& workload, MemoryMeter& meter);
  Trial run(int64_t batch, const TrialRequest& request) override;
  int64_t budget_bytes() const override;
  /// 2 MiB on CUDA (the caching allocator's small-segment size); 0 on the CPU budget.
  int64_t granularity_bytes() const override;
  /// Observers are told about every trial, step and phase (not owned).
  void add_observer(ProbeObserver* observer) { observers_.push_back(observer); }
  /// Batches from `source` instead of one synthetic batch (not owned; nullptr: synthetic).
  void set_batch_source(BatchSource* source) { source_ = source; }
  /// Cache policy (seed M1): the device cache is emptied after an out-of-memory only, unless
  /// this asks for it before every trial too (--empty-cache). Each emptying is timed and shown
  /// in the trial's JSON (`empty_cache_ms`, `empty_cache_calls`).
  void set_empty_cache_before_trials(bool on) { empty_cache_before_trials_ = on; }
  /// Activation checkpointing in every trial's forward pass (built-in models: their blocks);
  /// trials then record `checkpointing` in their JSON. Throws UsageError for a model without
  /// blocks (a TorchScript file) when the policy is enabled.
  void set_checkpointing(const CheckpointPolicy& policy);
  const CheckpointPolicy& checkpointing() const { return checkpointing_; }
  Workload& workload() { return workload_; }
  MemoryMeter& meter() { return meter_; }

 private:
  void synchronize() const;
  template <class F>
  void notify(F f) {
    for (ProbeObserver* o : observers_) f(*o);
  }
  Workload& workload_;
  MemoryMeter& meter_;
  std::vector<ProbeObserver*> observers_;
  BatchSource* source_ = nullptr;
  bool empty_cache_before_trials_ = false;
  CheckpointPolicy checkpointing_;
};

}  // namespace saturate

// Implements: running one training configuration safely and measuring it (a trial).
// Warm-up steps, then timed full training steps (forward, loss, backward, optimizer step) with
// device synchronisation; the median step time, samples/s and peak allocated/reserved bytes.
// An out-of-memory is a result: everything the trial allocated is released (optimizer state,
// gradients, the batch, the autograd graph), memory returns to the pre-trial baseline and the
// process stays healthy for the next trial.
#pragma once
#include "saturate/core/memory_meter.h"
#include "saturate/probe/workload.h"
#include "saturate/search/trial.h"

namespace saturate {

class Probe final : public TrialRunner {
 public:
  Probe(Workload& workload, MemoryMeter& meter);
  Trial run(int64_t batch, const TrialRequest& request) override;
  int64_t budget_bytes() const override;
  /// 2 MiB on CUDA (the caching allocator's small-segment size); 0 on the CPU budget.
  int64_t granularity_bytes() const override;

 private:
  void synchronize() const;
  Workload& workload_;
  MemoryMeter& meter_;
};

}  // namespace saturate

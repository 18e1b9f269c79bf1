// Implements: FLOPs and MFU per trial. Counts the FLOPs of each trial's first (warm-up) step
// with a FlopCounter — the timed steps run uncounted — and adds to the trial, when it fits:
//   findings.compute = {flops_per_step, flops_per_sample, achieved_flops_per_s, mfu}
// with MFU against a measured GEMM peak given by the caller (0: FLOPs only).
#pragma once
#include <cstdint>
#include <memory>

#include "saturate/monitor/flop_counter.h"
#include "saturate/probe/probe_hooks.h"

namespace saturate {

class ComputeObserver final : public ProbeObserver {
 public:
  explicit ComputeObserver(double peak_flops_per_s = 0) : peak_flops_per_s_(peak_flops_per_s) {}
  void set_peak_flops_per_s(double peak) { peak_flops_per_s_ = peak; }

  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void step_end(int step, bool measured) override;
  void trial_end(Trial& trial) override;

 private:
  double peak_flops_per_s_;
  int64_t batch_ = 0;
  bool counted_ = false;
  double flops_per_step_ = 0;
  std::unique_ptr<FlopCounter> counter_;
};

}  // namespace saturate

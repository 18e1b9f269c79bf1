// Implements: FLOPs and MFU per trial. Counts the FLOPs of each trial's first (warm-up) step
// with a FlopCounter — the timed steps run uncounted — and adds to the trial, when it fits:
//   findings.compute = {flops_per_step, flops_per_sample, achieved_flops_per_s, mfu}
// with MFU against a measured GEMM peak given by the caller (none: FLOPs only), never above 100 %:
// a trial that outruns the peak has it measured again, or gets no MFU and a note (checked_mfu).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "saturate/monitor/flop_counter.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/probe/probe_hooks.h"

namespace saturate {

class ComputeObserver final : public ProbeObserver {
 public:
  /// `remeasure` (may be empty) measures the peak again when a trial's rate outruns it
  /// (checked_mfu): at most once a search; the peak then holds the new measurement.
  explicit ComputeObserver(GemmPeak peak = {}, std::function<GemmPeak()> remeasure = {})
      : peak_(std::move(peak)), remeasure_(std::move(remeasure)) {}
  /// The peak MFU is counted against: the one given, or its second measurement.
  const GemmPeak& peak() const { return peak_; }
  /// Why a trial has FLOPs and a rate but no MFU (empty: none lacks it).
  const std::string& mfu_note() const { return mfu_note_; }

  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void step_end(int step, bool measured) override;
  void trial_end(Trial& trial) override;

 private:
  GemmPeak peak_;
  std::function<GemmPeak()> remeasure_;
  std::string mfu_note_;
  int64_t batch_ = 0;
  bool counted_ = false;
  double flops_per_step_ = 0;
  double recompute_flops_per_step_ = 0;
  std::unique_ptr<FlopCounter> counter_;
};

}  // namespace saturate

// Implements: FLOPs and MFU per trial. Counts the FLOPs of each trial's first (warm-up) step
// with a FlopCounter — the timed steps run uncounted — and adds to the trial, when it fits:
//   findings.compute = {flops_per_step, flops_per_sample, achieved_flops_per_s, mfu}
// with MFU against a measured GEMM peak given by the caller (none: FLOPs only), never above 100 %:
// a trial that outruns the peak has it measured again, or gets no MFU and a note (checked_mfu).
// A step whose products ran mostly in another precision than the peak's (bf16 under autocast
// against an fp32 peak) has the peak measured in that precision first, when the caller can.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "saturate/monitor/flop_counter.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/monitor/proc_stats.h"
#include "saturate/probe/probe_hooks.h"

namespace saturate {

class ComputeObserver final : public ProbeObserver {
 public:
  /// `remeasure` (may be empty) measures the peak again when a trial's rate outruns it
  /// (checked_mfu): at most once a search; the peak then holds the new measurement.
  /// `measure_in(precision, again)` (may be empty) measures a peak in the precision the step's
  /// FLOPs ran in, when its first counted step shows another than the peak's (once; `remeasure`
  /// then measures in it too). Given by callers that do not know the step's precision (a user's
  /// step: autocast is inside it).
  explicit ComputeObserver(GemmPeak peak = {}, std::function<GemmPeak()> remeasure = {},
                           std::function<GemmPeak(Precision, bool again)> measure_in = {})
      : peak_(std::move(peak)), remeasure_(std::move(remeasure)), measure_in_(std::move(measure_in)) {}
  /// The peak MFU is counted against: the one given, or its second measurement.
  const GemmPeak& peak() const { return peak_; }
  /// Why a trial has FLOPs and a rate but no MFU (empty: none lacks it).
  const std::string& mfu_note() const { return mfu_note_; }
  /// Other processes' busy CPUs since this observer was made (the trials' load; -1: not read),
  /// to set beside the load the peak was measured under.
  double trials_others_busy_cpus() const { return trials_load_.busy_cpus(); }

  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void step_end(int step, bool measured) override;
  void trial_end(Trial& trial) override;

 private:
  void match_peak_to_products();
  GemmPeak peak_;
  std::function<GemmPeak()> remeasure_;
  std::function<GemmPeak(Precision, bool)> measure_in_;
  std::string dtype_;  ///< the dtype most of the counted step's FLOPs ran in
  std::string mfu_note_;
  int64_t batch_ = 0;
  bool counted_ = false;
  double flops_per_step_ = 0;
  double recompute_flops_per_step_ = 0;
  std::unique_ptr<FlopCounter> counter_;
  OthersCpuMeter trials_load_;
};

}  // namespace saturate

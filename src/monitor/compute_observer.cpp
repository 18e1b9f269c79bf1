#include "saturate/monitor/compute_observer.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace saturate {

void ComputeObserver::trial_begin(int64_t batch) {
  batch_ = batch;
  counted_ = false;
  flops_per_step_ = 0;
  recompute_flops_per_step_ = 0;
  counter_.reset();
}

void ComputeObserver::step_begin(int step, bool measured) {
  if (counted_ || counter_) return;
  counter_ = std::make_unique<FlopCounter>();
}

void ComputeObserver::step_end(int step, bool measured) {
  if (!counter_) return;
  flops_per_step_ = counter_->total_flops();
  recompute_flops_per_step_ = counter_->recompute_flops();
  dtype_ = counter_->dominant_dtype();
  counter_.reset();
  counted_ = true;
}

void ComputeObserver::match_peak_to_products() {
  // the precision of the arithmetic the step did: a peak of another one bounds nothing (an H100's
  // bf16 tensor cores run ~15x its fp32 rate; a CPU without bf16 units runs bf16 slower than fp32)
  std::optional<Precision> products;
  if (dtype_ == "bf16") products = Precision::kBf16;
  else if (dtype_ == "fp16") products = Precision::kFp16;
  else if (dtype_ == "fp32") products = Precision::kFp32;
  if (!measure_in_ || !products || peak_.dtype.empty()) return;
  const bool same = peak_.dtype == dtype_ || (dtype_ == "fp32" && peak_.dtype == "tf32");
  const auto measure = std::move(measure_in_);
  measure_in_ = nullptr;  // once a search: the step's precision does not change between its trials
  if (same) return;
  peak_ = measure(*products, false);
  remeasure_ = [measure, p = *products] { return measure(p, true); };
}

void ComputeObserver::trial_end(Trial& trial) {
  counter_.reset();  // a step that ran out of memory ends without step_end
  if (!counted_ || flops_per_step_ <= 0 || !trial.ok()) return;
  // a step may run more samples than the trial's batch (two micro-batches when it accumulates)
  double samples_per_step = static_cast<double>(std::max<int64_t>(1, batch_));
  if (trial.step_time_ms > 0 && trial.samples_per_s > 0)
    samples_per_step = std::max(1.0, std::round(trial.samples_per_s * trial.step_time_ms / 1000.0));
  match_peak_to_products();
  ComputeFinding c;
  c.flops_per_step = flops_per_step_;
  c.flops_per_sample = flops_per_step_ / samples_per_step;
  c.recompute_flops_per_step = recompute_flops_per_step_;
  if (trial.step_time_ms > 0) {
    const double achieved = flops_per_step_ / (trial.step_time_ms / 1000.0);
    c.achieved_flops_per_s = achieved;
    // the hardware's rate (the model's FLOPs and any recomputation) is what the peak bounds: when it
    // outruns the peak, the peak is measured again (once a search); MFU and HFU are then both within it
    const double hardware = (flops_per_step_ + recompute_flops_per_step_) / (trial.step_time_ms / 1000.0);
    std::string why;
    const bool outran = peak_.flops_per_s > 0 && hardware > peak_.flops_per_s;
    const std::optional<double> hfu = checked_mfu(hardware, peak_, remeasure_, &why);
    if (outran) remeasure_ = nullptr;  // once: a peak measured twice is the machine's; a step above it is wrong
    if (hfu) c.mfu = checked_mfu(achieved, peak_, {}, &why);
    if (recompute_flops_per_step_ > 0) c.hfu = hfu;
    if (!why.empty()) mfu_note_ = why;
  }
  trial.findings.compute = c;
}

}  // namespace saturate

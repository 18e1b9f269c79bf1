#include "saturate/monitor/compute_observer.h"

#include <algorithm>
#include <cmath>

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
  counter_.reset();
  counted_ = true;
}

void ComputeObserver::trial_end(Trial& trial) {
  counter_.reset();  // a step that ran out of memory ends without step_end
  if (!counted_ || flops_per_step_ <= 0 || !trial.ok()) return;
  // a step may run more samples than the trial's batch (two micro-batches when it accumulates)
  double samples_per_step = static_cast<double>(std::max<int64_t>(1, batch_));
  if (trial.step_time_ms > 0 && trial.samples_per_s > 0)
    samples_per_step = std::max(1.0, std::round(trial.samples_per_s * trial.step_time_ms / 1000.0));
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

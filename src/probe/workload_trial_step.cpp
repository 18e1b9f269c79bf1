#include "saturate/probe/workload_trial_step.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

void require_non_negative(int64_t value, const char* option) {
  if (value < 0) throw UsageError(option, fmt::format("{} is negative; give 0 or a positive count", value));
}

int64_t batch_bytes(const Batch& b) {
  return static_cast<int64_t>(b.inputs.nbytes() + b.targets.nbytes());
}

}  // namespace

void TrainingFootprint::validate() const {
  if (global_batch && *global_batch < 1)
    throw UsageError("global_batch", fmt::format("{} is not a positive count; give 1 or more samples per step, or "
                                                 "none (the trial's batch x `accumulation`)",
                                                 *global_batch));
  if (accumulation < 1)
    throw UsageError("accumulation", fmt::format("{} is not a positive count; give 1 or more micro-batches per step",
                                                 accumulation));
  require_non_negative(prefetched_batches, "prefetched_batches");
  require_non_negative(eval_batch, "eval_batch");
  require_non_negative(eval_batch_per_micro, "eval_batch_per_micro");
  require_non_negative(eval_prefetched_batches, "eval_prefetched_batches");
  require_non_negative(eval_search_micro_batch, "eval_search_micro_batch");
  require_non_negative(held_beside_bytes, "held_beside_bytes");
  require_non_negative(held_in_step_bytes, "held_in_step_bytes");
  if (clip_grad_norm < 0)
    throw UsageError("clip_grad_norm", fmt::format("{} is negative; give 0 (off) or a positive norm", clip_grad_norm));
}

WorkloadTrialStep::WorkloadTrialStep(Workload& workload, TrainingFootprint footprint) : workload_(workload) {
  set_footprint(footprint);
}

void WorkloadTrialStep::set_footprint(const TrainingFootprint& footprint) {
  footprint.validate();
  check_step_options(workload_, footprint.precision, footprint.checkpointing);
  footprint_ = footprint;
}

int64_t WorkloadTrialStep::global_batch_of(int64_t batch) const {
  if (footprint_.global_batch) return std::max(*footprint_.global_batch, batch);
  return batch * footprint_.accumulation;
}

int64_t WorkloadTrialStep::eval_batch(int64_t batch) const {
  if (footprint_.eval_search_micro_batch > 0) return batch;
  return footprint_.eval_batch > 0 ? footprint_.eval_batch : footprint_.eval_batch_per_micro * batch;
}

int64_t WorkloadTrialStep::train_batch(int64_t batch) const {
  return footprint_.eval_search_micro_batch > 0 ? footprint_.eval_search_micro_batch : batch;
}

int64_t WorkloadTrialStep::window_batch(int64_t batch) const {
  return footprint_.prefetches_micro_batches ? std::min(batch, global_batch_of(batch)) : global_batch_of(batch);
}

int64_t WorkloadTrialStep::resident_data_bytes(int64_t batch) const {
  const int64_t global = global_batch_of(batch);
  const Batch one = workload_.empty_batch(1, torch::kCPU);
  const int64_t per_sample = batch_bytes(one);
  const int64_t window = workload_.device().is_cpu() ? footprint_.prefetched_batches : 0;
  return per_sample * (global + window * window_batch(batch));
}

void WorkloadTrialStep::begin(int64_t trial_batch) {
  last_trial_batch_ = trial_batch;
  const int64_t batch = train_batch(trial_batch);
  apply_precision_settings(footprint_.precision);
  StepOptions o;
  o.step_config() = footprint_.step_config();
  o.micro_batch = batch;
  switches_.reset();  // the previous trial's first: this one saves the switches as they were before it
  switches_ = std::make_unique<ProcessSwitches>(footprint_.fast_paths);
  step_ = std::make_unique<TrainingStep>(workload_, o);
  workload_.model().train(true);
  last_batch_ = batch;
  const torch::Device device = workload_.device();
  const int64_t global = global_batch_of(batch);
  if (source_ && footprint_.eval_search_micro_batch == 0) {
    source_->reset(batch);
  } else if (global > batch) {
    // the in-use global batch lives where the loader puts it: on the host (the device, on CPU)
    data_ = workload_.synthetic_batch(global, device.is_cpu() ? device : torch::Device(torch::kCPU));
  } else {
    data_ = workload_.synthetic_batch(batch);
  }
  if (footprint_.held_beside_bytes > 0)
    held_beside_ = torch::empty({footprint_.held_beside_bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
  // the loader's window of prefetched batches: host memory, the device's on CPU
  if (device.is_cpu())
    for (int64_t i = 0; i < footprint_.prefetched_batches; ++i)
      window_.push_back(workload_.empty_batch(window_batch(batch), device));
  if (footprint_.eval_search_micro_batch == 0) return;
  // training's state as it evaluates, without a training step: every gradient, and the
  // optimizer's state from one step over them (zero gradients; the weights the trial changes
  // are the caller's to restore, as after any trial's steps)
  for (auto& p : workload_.model().parameters())
    if (p.requires_grad()) p.mutable_grad() = torch::zeros_like(p);
  step_->optimizer().step();
  if (device.is_cpu())
    for (int64_t i = 0; i < footprint_.eval_prefetched_batches; ++i)
      eval_window_.push_back(workload_.empty_batch(trial_batch, device));
}

int64_t WorkloadTrialStep::samples_per_step(int64_t batch) const {
  if (footprint_.eval_search_micro_batch > 0) return batch;  // the evaluation's samples
  if (source_) return batch;
  const int64_t global = global_batch_of(batch);
  return std::min(global, global > batch ? 2 * batch : batch);
}

void WorkloadTrialStep::step(int64_t batch, PhaseObserver* observer) {
  if (footprint_.eval_search_micro_batch > 0) {
    if (observer) observer->phase_begin(Phase::kForward);
    evaluate(batch);
    if (observer) observer->phase_end(Phase::kForward);
    return;
  }
  step_->set_observer(observer);
  if (source_) {
    if (observer) observer->phase_begin(Phase::kDataWait);
    data_ = source_->next(batch);
    if (observer) observer->phase_end(Phase::kDataWait);
  }
  const int64_t global = data_.inputs.size(0);
  // a global batch the loader hands over in pieces (LoaderOptions::parts) is joined on the host:
  // while a piece is copied in, the whole batch and that piece are held (data/loader_data.cpp),
  // which can peak above the step itself where the input dominates (an mlp on images). On CPU
  // that is the budget's memory: the piece is allocated here, beside the batch and the window
  if (!source_ && footprint_.prefetches_micro_batches && global > batch && workload_.device().is_cpu()) {
    const int64_t parts = (global + batch - 1) / batch;
    (void)workload_.empty_batch((global + parts - 1) / parts, workload_.device());  // its largest piece
  }
  const torch::Tensor in_step =
      footprint_.held_in_step_bytes > 0
          ? torch::empty({footprint_.held_in_step_bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(workload_.device()))
          : torch::Tensor();
  // with accumulation, two micro-batches: the second backward accumulates into the gradients
  const int64_t n = std::min(global, samples_per_step(batch));
  const Batch part = n == global ? data_ : Batch{data_.inputs.slice(0, 0, n), data_.targets.slice(0, 0, n)};
  (void)step_->run(part);
}

void WorkloadTrialStep::finish(int64_t batch) {
  if (footprint_.eval_search_micro_batch > 0) return;  // its steps were the evaluation
  const int64_t eval = eval_batch(batch);
  if (eval <= 0) return;
  const torch::Device device = workload_.device();
  if (device.is_cpu())
    for (int64_t i = 0; i < footprint_.eval_prefetched_batches; ++i)
      eval_window_.push_back(workload_.empty_batch(eval, device));
  evaluate(eval);
  eval_window_.clear();
}

void WorkloadTrialStep::evaluate(int64_t batch) {
  torch::NoGradGuard no_grad;
  const torch::Device device = workload_.device();
  const Batch b = workload_.synthetic_batch(batch, device.is_cpu() ? device : torch::Device(torch::kCPU));
  workload_.model().train(false);
  try {
    torch::Tensor logits = step_->forward(b.inputs.to(device)).to(torch::kFloat);
    (void)workload_.loss(logits, b.targets.to(device));
  } catch (...) {
    workload_.model().train(true);
    throw;
  }
  workload_.model().train(true);
}

void WorkloadTrialStep::end() noexcept {
  step_.reset();  // the optimizer and its state
  switches_.reset();
  data_ = Batch{};
  window_.clear();
  eval_window_.clear();
  held_beside_ = torch::Tensor();
  for (auto& p : workload_.model().parameters()) p.mutable_grad() = torch::Tensor();
  workload_.model().train(true);
}

void WorkloadTrialStep::describe(StepDescription& setup) const {
  if (footprint_.checkpointing.enabled()) setup.checkpointing = to_string(footprint_.checkpointing);
  if (footprint_.precision != Precision::kFp32) setup.precision = to_string(footprint_.precision);
  if (!footprint_.fast_paths.names().empty()) setup.fast_paths = footprint_.fast_paths.to_string();
  const bool accumulates = footprint_.global_batch || footprint_.accumulation > 1;
  if (accumulates) setup.global_batch = global_batch_of(last_batch_);
  setup.prefetched_batches = footprint_.prefetched_batches;
  if (footprint_.prefetched_batches > 0) setup.prefetched_batch_samples = window_batch(last_batch_);
  if (footprint_.eval_search_micro_batch > 0 || footprint_.eval_batch > 0 || footprint_.eval_batch_per_micro > 0)
    setup.eval_batch = eval_batch(footprint_.eval_search_micro_batch > 0 ? last_trial_batch_ : last_batch_);
  if (accumulates || (footprint_.prefetched_batches > 0 && workload_.device().is_cpu()))
    setup.resident_data_bytes = resident_data_bytes(last_batch_);
}

}  // namespace saturate

#include "saturate/data/data_feed.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#ifdef SATURATE_WITH_CUDA
#include "data/device_copy.h"
#endif

namespace saturate {

DataFeed::DataFeed(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device)
    : dataset_(std::move(dataset)), options_(std::move(options)), device_(device) {
  options_.device = device_;
}

DataFeed::~DataFeed() = default;

SkipReport DataFeed::skipped() const {
  SkipReport r = dataset_->open_skips();
  if (loader_) r.merge(loader_->stats().skipped);
  return r;
}

void DataFeed::reset(int64_t batch) {
  // each trial starts the stream afresh (epoch 0), so trials see the same data.
  loader_.reset();
  error_ = nullptr;
  carry_inputs_ = torch::Tensor();
  carry_targets_ = torch::Tensor();
  LoaderOptions o = options_;
  o.batch_size = batch;
  loader_ = std::make_unique<Loader>(dataset_, o);
}

Batch DataFeed::next(int64_t batch) {
  if (!loader_ || loader_->options().batch_size != batch) reset(batch);
  // the probe measures `batch` samples: an epoch's short last batch is topped up from the next.
  std::vector<torch::Tensor> inputs, targets;
  int64_t have = 0;
  if (carry_inputs_.defined()) {
    inputs.push_back(carry_inputs_);
    targets.push_back(carry_targets_);
    have = carry_inputs_.size(0);
    carry_inputs_ = carry_targets_ = torch::Tensor();
  }
  while (have < batch) {
    LoadedBatch b;
    try {
      b = loader_->next();
    } catch (const DataError&) {
      error_ = std::current_exception();
      throw;
    }
    step_wait_ms_ += b.wait_ms;
    have += b.inputs.size(0);
    inputs.push_back(std::move(b.inputs));
    targets.push_back(std::move(b.targets));
  }
  torch::Tensor in = inputs.size() == 1 ? inputs[0] : torch::cat(inputs);
  torch::Tensor tg = targets.size() == 1 ? targets[0] : torch::cat(targets);
  if (have > batch) {
    carry_inputs_ = in.narrow(0, batch, have - batch);
    carry_targets_ = tg.narrow(0, batch, have - batch);
    in = in.narrow(0, 0, batch);
    tg = tg.narrow(0, 0, batch);
  }
  if (device_.is_cuda()) {
#ifdef SATURATE_WITH_CUDA
    if (!in.is_pinned()) {  // cat made an unpinned copy
      in = in.pin_memory();
      tg = tg.pin_memory();
    }
    auto [din, dtg] = data::copy_to_cuda(in, tg, device_);
    return {din, dtg};
#else
    throw RuntimeFailure("this build of saturate has no CUDA support; use `device` cpu");
#endif
  }
  if (!device_.is_cpu()) return {in.to(device_), tg.to(device_)};
  return {in, tg};
}

void DataFeed::trial_begin(int64_t) {
  wait_ms_total_ = step_ms_total_ = 0;
  measured_steps_ = 0;
}

void DataFeed::step_begin(int, bool measured) {
  measured_ = measured;
  step_wait_ms_ = 0;
  step_start_ = std::chrono::steady_clock::now();
}

void DataFeed::step_end(int, bool measured) {
  if (!measured) return;
  step_ms_total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start_).count();
  wait_ms_total_ += step_wait_ms_;
  ++measured_steps_;
}

void DataFeed::trial_end(Trial& trial) {
  last_ = DataTrialStats{};
  last_.workers = options_.workers;
  last_.measured_steps = measured_steps_;
  if (measured_steps_ > 0) {
    last_.data_wait_ms = wait_ms_total_ / static_cast<double>(measured_steps_);
    last_.step_ms = step_ms_total_ / static_cast<double>(measured_steps_);
    last_.data_wait_fraction = step_ms_total_ > 0 ? std::min(1.0, wait_ms_total_ / step_ms_total_) : 0;
  }
  last_.skipped_samples = skipped().count;
  DataFindings d;
  d.dataset = dataset_->name();
  d.workers = options_.workers;
  d.prefetch = options_.prefetch;
  d.wait_ms = last_.data_wait_ms;
  d.wait_fraction = last_.data_wait_fraction;
  d.skipped_samples = last_.skipped_samples;
  d.workers_auto = std::move(worker_tuning_);
  worker_tuning_.reset();
  trial.findings.data = std::move(d);
}

WorkerTuning choose_workers(const std::function<WorkerCurvePoint(int)>& measure, const WorkerTuningOptions& o) {
  int max_workers = o.max_workers;
  if (max_workers <= 0) max_workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
  WorkerTuning result;
  int w = 1;
  while (true) {
    const WorkerCurvePoint p = measure(w);
    result.curve.push_back(p);
    if (o.on_point) o.on_point(p);
    const WorkerCurvePoint* before = result.curve.size() > 1 ? &result.curve[result.curve.size() - 2] : nullptr;
    if (before && p.samples_per_s < before->samples_per_s * (1 + o.min_gain)) {
      result.workers = before->workers;
      result.reason = fmt::format("{} workers did not help ({:+.1f} % samples/s)", w,
                                  100.0 * (p.samples_per_s / before->samples_per_s - 1));
      break;
    }
    if (p.data_wait_fraction < o.wait_fraction) {
      result.workers = w;
      result.reason = fmt::format("data wait {:.1f} % of the step, under {:.0f} %", 100 * p.data_wait_fraction,
                                  100 * o.wait_fraction);
      break;
    }
    if (w >= max_workers) {
      result.workers = w;
      result.reason = fmt::format("no free cores for more workers ({} cores)", std::thread::hardware_concurrency());
      break;
    }
    w = w < 4 ? w + 1 : std::min(max_workers, w + (w + 1) / 2);
  }
  return result;
}

namespace {
/// A worker count whose trial ran out of memory: the tuning stops there (a result, not a failure).
struct WorkersOutOfMemory {
  int workers;
  std::string error;
};
}  // namespace

WorkerTuning tune_workers(TrialRunner& runner, DataFeed& feed, int64_t batch, const WorkerTuningOptions& o) {
  std::vector<WorkerCurvePoint> measured;
  const auto measure = [&](int w) {
    feed.set_workers(w);
    const Trial t = runner.run(batch, {o.warmup_steps, o.measure_steps, 0});
    if (!t.ok()) {
      if (feed.error()) std::rethrow_exception(feed.error());
      if (t.status == TrialStatus::kOom || t.status == TrialStatus::kOverTarget) throw WorkersOutOfMemory{w, t.error};
      throw RuntimeFailure(fmt::format("`workers` auto: the trial at batch {} with {} worker(s) failed ({}: {})", batch,
                                       w, to_string(t.status), t.error));
    }
    // the mean step, not the probe's median: with several workers, batches arrive in bursts
    // (waits alternate with none), and a median picks one side.
    const DataTrialStats& d = feed.last();
    const double step_ms = d.step_ms > 0 ? d.step_ms : t.step_time_ms;
    measured.push_back(WorkerCurvePoint{w, step_ms > 0 ? 1000.0 * static_cast<double>(batch) / step_ms : 0, step_ms,
                                        d.data_wait_fraction});
    return measured.back();
  };
  WorkerTuning result;
  try {
    result = choose_workers(measure, o);
  } catch (const WorkersOutOfMemory& oom) {
    // more workers hold more batches in flight; with none measured the batch itself does not fit,
    // which the run that follows reports as its own result
    result.curve = measured;
    result.workers = measured.empty() ? 1 : measured.back().workers;
    result.reason = measured.empty()
                        ? fmt::format("not tuned: batch {} ran out of memory with 1 worker ({})", batch, oom.error)
                        : fmt::format("{} workers ran out of memory at batch {}; {} did not", oom.workers, batch,
                                      result.workers);
  }
  feed.set_workers(result.workers);
  return result;
}

}  // namespace saturate

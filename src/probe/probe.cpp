#include "saturate/probe/probe.h"

#include "saturate/core/stop_signals.h"

#include <algorithm>
#include <chrono>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/errors.h"
#include "core/failed_backward.h"
#include "saturate/core/oom.h"
#include "core/run_queue.h"
#include "core/statistics.h"

namespace saturate {
namespace {

/// The line of an error that says what went wrong. The TorchScript interpreter wraps the error
/// it met ("The following operation failed in the TorchScript interpreter.", the script's
/// traceback, then "RuntimeError: <the error>"): its last line is the one that says it.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10_error ? c10_error->what_without_backtrace() : e.what();
  if (msg.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    size_t end = msg.find_last_not_of(" \n");
    if (end != std::string::npos) {
      const size_t begin = msg.rfind('\n', end);
      const std::string last = msg.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin + 1));
      if (!last.empty()) return "in the TorchScript interpreter: " + last;
    }
  }
  const size_t nl = msg.find('\n');
  return nl == std::string::npos ? msg : msg.substr(0, nl);
}

/// Lowers the budget for one trial and puts it back, whatever happens.
class BudgetOverride {
 public:
  BudgetOverride(MemoryMeter& meter, int64_t bytes) : meter_(meter), saved_(meter.budget_bytes()) {
    if (bytes > 0) meter_.set_budget_bytes(bytes);
  }
  ~BudgetOverride() { meter_.set_budget_bytes(saved_); }

 private:
  MemoryMeter& meter_;
  int64_t saved_;
};

}  // namespace

/// Tells every observer of the probe about the phases of a step, and cuts the peak window where
/// the step's optimizer phase begins (Trial::pre_optimizer_peak_bytes).
class Probe::Fanout final : public PhaseObserver {
 public:
  Fanout(const std::vector<ProbeObserver*>& observers, MemoryMeter& meter) : observers_(observers), meter_(meter) {}
  void phase_begin(Phase p) override {
    if (p == Phase::kOptimizer && watching_ && pre_optimizer_peak_bytes_ == 0)
      pre_optimizer_peak_bytes_ = meter_.stats().peak_reserved_bytes;
    for (ProbeObserver* o : observers_) o->phase_begin(p);
  }
  void phase_end(Phase p) override {
    for (ProbeObserver* o : observers_) o->phase_end(p);
  }
  void phase_moved(Phase p, Phase within, double ms) override {
    for (ProbeObserver* o : observers_) o->phase_moved(p, within, ms);
  }
  void region_begin(const std::string& name) override {
    for (ProbeObserver* o : observers_) o->region_begin(name);
  }
  void region_end(const std::string& name) override {
    for (ProbeObserver* o : observers_) o->region_end(name);
  }
  /// From here on (the last step) the peak window is the step's: the trial's peak so far is kept.
  void watch_step() {
    keep_peak();
    meter_.reset_peak();
    watching_ = true;
  }
  /// The trial's peaks over every window.
  void keep_peak() {
    const MemoryStats s = meter_.stats();
    peak_allocated_bytes_ = std::max(peak_allocated_bytes_, s.peak_allocated_bytes);
    peak_reserved_bytes_ = std::max(peak_reserved_bytes_, s.peak_reserved_bytes);
  }
  int64_t peak_allocated_bytes() const { return peak_allocated_bytes_; }
  int64_t peak_reserved_bytes() const { return peak_reserved_bytes_; }
  int64_t pre_optimizer_peak_bytes() const { return pre_optimizer_peak_bytes_; }

 private:
  const std::vector<ProbeObserver*>& observers_;
  MemoryMeter& meter_;
  bool watching_ = false;
  int64_t peak_allocated_bytes_ = 0, peak_reserved_bytes_ = 0, pre_optimizer_peak_bytes_ = 0;
};

Probe::Probe(Workload& workload, MemoryMeter& meter)
    : owned_step_(std::make_unique<WorkloadTrialStep>(workload)), step_(*owned_step_), meter_(meter) {}

Probe::Probe(TrialStep& step, MemoryMeter& meter) : step_(step), meter_(meter) {}

WorkloadTrialStep& Probe::workload_step() {
  auto* w = dynamic_cast<WorkloadTrialStep*>(&step_);
  if (!w) throw UsageError("this probe runs a user's own step: it has no built-in workload to configure");
  return *w;
}

int64_t Probe::budget_bytes() const { return meter_.budget_bytes(); }

int64_t Probe::granularity_bytes() const { return meter_.device().is_cuda() ? int64_t{2} << 20 : 0; }

void Probe::set_checkpointing(const CheckpointPolicy& policy) {
  TrainingFootprint f = workload_step().footprint();
  f.checkpointing = policy;
  workload_step().set_footprint(f);
}

void Probe::synchronize() const {
  if (step_.device().is_cuda()) torch::cuda::synchronize(step_.device().index());
}

/// The measured steps' times: wall, and own (less the run-queue wait, on CPU devices).
struct Probe::StepTimes {
  std::vector<double> wall_ms, own_ms;
  double waited_ms = 0;
  bool count_waits = false;
};

int Probe::run_steps(int64_t batch, const TrialRequest& request, Fanout& fanout, Trial& t, StepTimes& times) {
  using clock = std::chrono::steady_clock;
  PhaseObserver* const observer = &fanout;
  int stopped = 0;
  int64_t after_first_step = 0;
  const int total = request.warmup_steps + request.measure_steps;
  for (int i = 0; i < total && !(stopped = stop_signal_received()); ++i) {
    ++t.steps;
    const bool measured = i >= request.warmup_steps;
    notify([&](ProbeObserver& o) { o.step_begin(i, measured); });
    if (i == total - 1) fanout.watch_step();
    const double wait_before_ms = times.count_waits ? run_queue_wait_ms() : 0;  // read outside the timed span
    const auto start = clock::now();
    step_.step(batch, observer);
    synchronize();
    const double wall_ms = std::chrono::duration<double, std::milli>(clock::now() - start).count();
    const double wait_ms = times.count_waits ? std::max(0.0, run_queue_wait_ms() - wait_before_ms) : 0;
    const int64_t held = meter_.stats().allocated_bytes;  // between calls: what the step keeps
    if (i == 0) after_first_step = held;
    else t.step_growth_bytes = held - after_first_step;
    if (measured) {
      times.wall_ms.push_back(wall_ms);
      times.own_ms.push_back(std::max(wall_ms - wait_ms, 0.01 * wall_ms));
      times.waited_ms += wait_ms;
    }
    notify([&](ProbeObserver& o) { o.step_end(i, measured); });
  }
  return stopped;
}

Trial Probe::run(int64_t batch, const TrialRequest& request) {
  using clock = std::chrono::steady_clock;
  Trial t;
  t.batch = batch;
  BudgetOverride budget(meter_, request.budget_bytes);
  t.budget_bytes = meter_.budget_bytes();
  synchronize();
  // cache policy (M1): empty the cache only after an OOM, or when asked; the cost is reported.
  double empty_cache_ms = 0;
  int empty_cache_calls = 0;
  const auto empty_cache = [&] {
    const auto start = clock::now();
    meter_.release_cache();
    empty_cache_ms += std::chrono::duration<double, std::milli>(clock::now() - start).count();
    ++empty_cache_calls;
  };
  if (empty_cache_before_trials_) empty_cache();
  t.baseline_bytes = meter_.stats().allocated_bytes;
  meter_.reset_peak();
  const auto trial_start = clock::now();
  StepTimes times;
  times.count_waits = step_.device().is_cpu() && run_queue_wait_ms() >= 0;
  Fanout fanout(observers_, meter_);
  notify([&](ProbeObserver& o) { o.trial_begin(batch); });
  int stopped = 0;  // a stop signal ends the trial at the next step boundary, then the search
  try {
    step_.begin(batch);
    PhaseObserverInstall install(&fanout);  // a user's step marks its phases with PhaseScope
    stopped = run_steps(batch, request, fanout, t, times);
    step_.finish(batch);
    synchronize();
    t.status = TrialStatus::kOk;
  } catch (const std::exception& e) {
    t.status = is_out_of_memory(e) ? TrialStatus::kOom : TrialStatus::kError;
    t.error = first_line(e);
  }
  // the graph died with the exception (and what its backward had queued is given back); the step
  // drops its optimizer, batches and gradients.
  if (t.status != TrialStatus::kOk || stopped) release_failed_backward();
  step_.end();
  synchronize();
  if (stopped) throw StoppedBySignal(stopped, fmt::format("the batch-size search (a trial at batch {}, step {})",
                                                          batch, t.steps));
  fanout.keep_peak();
  t.peak_allocated_bytes = fanout.peak_allocated_bytes();
  t.peak_reserved_bytes = fanout.peak_reserved_bytes();
  if (t.status == TrialStatus::kOk) t.pre_optimizer_peak_bytes = fanout.pre_optimizer_peak_bytes();
  if (t.status == TrialStatus::kOom) empty_cache();  // hand the failed trial's cache back
  t.after_bytes = meter_.stats().allocated_bytes;
  if (!times.wall_ms.empty()) {
    const auto per_s = [&](double ms) {
      return ms > 0 ? 1000.0 * static_cast<double>(step_.samples_per_step(batch)) / ms : 0;
    };
    t.step_time_ms = median(times.wall_ms);
    t.samples_per_s = per_s(t.step_time_ms);
    if (times.count_waits) {
      t.run_queue_wait_ms = times.waited_ms;
      t.own_samples_per_s = per_s(median(times.own_ms));
    }
  }
  t.seconds = std::chrono::duration<double>(clock::now() - trial_start).count();
  step_.describe(t.findings.setup);
  if (empty_cache_calls > 0) t.findings.cache_return = CacheReturn{empty_cache_calls, empty_cache_ms};
  notify([&](ProbeObserver& o) { o.trial_end(t); });
  return t;
}

}  // namespace saturate

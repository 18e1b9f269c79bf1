#include "saturate/monitor/monitor_observer.h"
#include "monitor/readings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include <sys/resource.h>

#include "core/statistics.h"

namespace saturate {
namespace {

constexpr int kPhaseCount = 6;
constexpr Phase kPhases[kPhaseCount] = {Phase::kDataWait,  Phase::kHostToDevice, Phase::kForward,
                                        Phase::kBackward, Phase::kOptimizer,    Phase::kAllreduce};
bool is_compute(Phase p) { return p == Phase::kForward || p == Phase::kBackward || p == Phase::kOptimizer; }

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct KernelTime {
  int64_t minor_faults = 0;
  double system_s = 0, cpu_s = 0;  ///< system, and user + system
};
/// The process's minor page faults and CPU seconds so far.
KernelTime kernel_time() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return {};
  const auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return {static_cast<int64_t>(u.ru_minflt), s(u.ru_stime), s(u.ru_stime) + s(u.ru_utime)};
}

double util_mean(const Utilization& util, const char* name) {
  const UtilizationStat* s = util.field(name);
  return s ? s->mean : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

MonitorObserver::MonitorObserver(MonitorOptions options) : options_(std::move(options)) {
  SamplerOptions so;
  so.sample_hz = options_.sample_hz;
  so.use_nvml = options_.cuda;  // a CPU run's utilization is the process's, even on a GPU host
  so.gpu_index = options_.device_index;
  so.nvml_path = options_.nvml_path;
  sampler_ = std::make_unique<Sampler>(so);
  clock_ = options_.cuda ? make_cuda_phase_clock(options_.device_index) : make_host_phase_clock();
  if (!options_.trace_path.empty()) trace_ = std::make_unique<TraceWriter>();
  // calibrate before any trial, so that no trial pays for it.
  if (options_.measure_launch && !options_.cuda) per_op_us_ = per_op_overhead_us();
  phase_ms_.resize(kPhaseCount);
  sampler_->start();
}

MonitorObserver::~MonitorObserver() {
  counter_.stop();
  sampler_->stop();
}

std::string MonitorObserver::nvml_note() const { return options_.cuda ? sampler_->nvml_note() : ""; }

void MonitorObserver::trial_begin(int64_t batch) {
  batch_ = batch;
  step_ = -1;
  in_step_ = false;
  open_.clear();
  closed_.clear();
  if (!options_.training) {  // a training run's op count holds for its later windows
    ops_counted_ = -1;
    ops_on_timed_step_ = false;
  }
  hooks_s_ = hooks_timed_s_ = 0;
  accounted_timed_ = steps_this_trial_ = timed_this_trial_ = 0;
  step_ms_.clear();
  compute_ms_.clear();
  host_issue_ms_.clear();
  for (auto& v : phase_ms_) v.clear();
  window_begin_ = sampler_->sample_now().at;  // the window's first edge
  sampler_cpu_at_begin_ = sampler_->own_cpu_s();
  kernel_at_ = Clock::time_point{};
  trial_begin_ = Clock::now();
}

void MonitorObserver::step_begin(int step, bool measured) {
  const auto t0 = Clock::now();
  // the hooks time themselves on every probe step, and in training on warm-up steps and every
  // 16th timed step: the clock reads that measure the hooks are half of their cost
  account_ = !options_.training || !measured || (steps_seen_++ % kAccountEvery) == 0;
  hooks_at_step_begin_ = hooks_s_;
  ++steps_this_trial_;
  if (measured && timed_this_trial_++ == 0) {  // the kernel's share counts from the first timed step
    const KernelTime k = kernel_time();
    page_faults_at_begin_ = k.minor_faults;
    system_cpu_at_begin_s_ = k.system_s;
    cpu_at_begin_s_ = k.cpu_s;
    kernel_at_ = Clock::now();
  }
  step_ = step;
  measured_ = measured;
  in_step_ = true;
  open_.clear();
  closed_.clear();
  moved_ms_.fill(0);
  clock_->clear();
  // count ops on every warm-up step (the last one is kept); on a timed step only when no
  // warm-up step was run, since counting slows the ops a little.
  if (options_.measure_launch && (!measured || ops_counted_ < 0)) {
    ops_on_timed_step_ = measured;
    counter_.start();
  }
  if (account_) {
    step_begin_ = Clock::now();
    hooks_s_ += std::chrono::duration<double>(step_begin_ - t0).count();
  } else {
    step_begin_ = t0;
  }
}

void MonitorObserver::phase_begin(Phase phase) {
  const auto t0 = Clock::now();
  open_.push_back({phase, t0, clock_->mark(t0)});
  if (account_) hooks_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

void MonitorObserver::phase_end(Phase phase) {
  const auto t = Clock::now();
  const int mark = clock_->mark(t);
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (it->phase != phase) continue;
    closed_.push_back({phase, it->host_begin, t, it->mark_begin, mark});
    open_.erase(std::next(it).base());
    break;
  }
  if (account_) hooks_s_ += std::chrono::duration<double>(Clock::now() - t).count();
}

void MonitorObserver::step_end(int step, bool measured) {
  const auto t_end = Clock::now();
  last_step_end_ = t_end;
  if (counter_.running()) ops_counted_ = counter_.stop();
  if (measured) {
    std::array<double, kPhaseCount> per_phase{};
    double compute = 0, host_issue = 0;
    for (const ClosedPhase& c : closed_) {
      const double device_ms = clock_->elapsed_ms(c.mark_begin, c.mark_end);
      per_phase[static_cast<size_t>(c.phase)] += device_ms;
      if (is_compute(c.phase)) {
        compute += device_ms;
        host_issue += ms(c.host_end - c.host_begin);
      }
    }
    for (int i = 0; i < kPhaseCount; ++i) {
      const size_t k = static_cast<size_t>(i);
      per_phase[k] += moved_ms_[k];
      phase_ms_[k].push_back(per_phase[k]);
      if (is_compute(kPhases[i])) {  // time moved out of a compute phase was neither compute nor issue
        compute += moved_ms_[k];
        host_issue += moved_ms_[k];
      }
    }
    compute_ms_.push_back(compute);
    host_issue_ms_.push_back(host_issue);
    step_ms_.push_back(ms(t_end - step_begin_));
  }
  if (trace_) {
    for (const ClosedPhase& c : closed_) trace_->complete(to_string(c.phase), "phase", c.host_begin, c.host_end, {{"step", step}});
    close_trace_step(t_end, false);
  }
  in_step_ = false;
  if (account_) {
    hooks_s_ += std::chrono::duration<double>(Clock::now() - t_end).count();
    if (measured) {  // the sample of timed steps; warm-up steps (op counting) are all in hooks_s_
      hooks_timed_s_ += hooks_s_ - hooks_at_step_begin_;
      ++accounted_timed_;
    }
  }
}

void MonitorObserver::phase_moved(Phase phase, Phase within, double ms) {
  moved_ms_[static_cast<size_t>(phase)] += ms;
  moved_ms_[static_cast<size_t>(within)] -= ms;
}

void MonitorObserver::close_trace_step(Clock::time_point end, bool aborted) {
  nlohmann::json args = {{"batch", batch_}, {"measured", measured_}};
  if (aborted) args["aborted"] = true;
  trace_->complete("step " + std::to_string(step_), "step", step_begin_, end, std::move(args));
}

StepProfile MonitorObserver::step_profile(const Utilization& util) const {
  StepProfile p;
  p.on_gpu = options_.cuda;
  p.mixed_precision = options_.mixed_precision;
  // each cause's share of its own step, the median over the timed steps, on the median step
  // time: shares taken within one step add up to it (per-phase medians of milliseconds taken
  // across different steps need not: one step preempted in its forward, another in its
  // optimizer), and a step or two preempted by other load on the machine move a mean, or the
  // one step a single representative would be, but not this.
  const size_t n = step_ms_.size();
  std::vector<double> data_share(n), comm_share(n), compute_share(n);
  const auto phase_at = [&](Phase ph, size_t i) { return phase_ms_[static_cast<size_t>(ph)][i]; };
  for (size_t i = 0; i < n; ++i) {
    const double step = step_ms_[i] > 0 ? step_ms_[i] : 1.0;
    data_share[i] = (phase_at(Phase::kDataWait, i) + phase_at(Phase::kHostToDevice, i)) / step;
    comm_share[i] = phase_at(Phase::kAllreduce, i) / step;
    compute_share[i] =
        (phase_at(Phase::kForward, i) + phase_at(Phase::kBackward, i) + phase_at(Phase::kOptimizer, i)) / step;
  }
  p.step_ms = median(step_ms_);
  p.data_wait_ms = median(data_share) * p.step_ms;
  p.allreduce_ms = median(comm_share) * p.step_ms;
  p.forward_ms = median(compute_share) * p.step_ms;  // the compute phases together
  if (options_.measure_launch) measure_launch(p);
  p.gpu_util_percent = util_mean(util, "gpu_util_percent");
  p.mem_util_percent = util_mean(util, "mem_util_percent");
  p.cpu_percent = util_mean(util, "cpu_percent");
  // the timed steps only: a warm-up step's first touch of new memory is not churn
  const KernelTime k = kernel_time();
  if (kernel_at_ != Clock::time_point{} && timed_this_trial_ > 0) {
    p.page_faults_per_step =
        static_cast<double>(k.minor_faults - page_faults_at_begin_) / static_cast<double>(timed_this_trial_);
    // of the process's CPU time, not of the wall time: other load on the machine stretches the
    // wall time, not this share
    const double cpu_s = k.cpu_s - cpu_at_begin_s_;
    if (cpu_s > 0) p.system_cpu_share = (k.system_s - system_cpu_at_begin_s_) / cpu_s;
  }
  return p;
}

void MonitorObserver::measure_launch(StepProfile& p) const {
  if (options_.cuda) {
    const double device = median(compute_ms_), host = median(host_issue_ms_);
    if (device > 0) p.launch_fraction = host / device;
    p.launch_evidence = {{"method", "host issue time / device time of the compute phases"},
                         {"host_issue_ms", monitor_detail::round3(host)},
                         {"device_ms", monitor_detail::round3(device)}};
  } else if (ops_counted_ >= 0 && per_op_us_ > 0) {
    // the fastest timed step: the least disturbed by other load on the machine.
    const double compute = *std::min_element(compute_ms_.begin(), compute_ms_.end());
    const double overhead = static_cast<double>(ops_counted_) * per_op_us_ / 1000.0;
    if (compute > 0) p.launch_fraction = overhead / compute;
    p.launch_evidence = {{"method", "ops per step x calibrated per-op cost / compute time"},
                         {"ops_per_step", ops_counted_},
                         {"per_op_us", monitor_detail::round3(per_op_us_)},
                         {"overhead_ms", monitor_detail::round3(overhead)},
                         {"compute_ms", monitor_detail::round3(compute)},
                         {"counted_on", ops_on_timed_step_ ? "timed step" : "warm-up step"}};
  }
  if (options_.cuda && ops_counted_ >= 0) p.launch_evidence["ops_per_step"] = ops_counted_;
}

void MonitorObserver::trial_end(Trial& trial) {
  const auto now = Clock::now();
  if (counter_.running()) counter_.stop();
  if (in_step_) {  // the step ended with an exception (an OOM): close what it opened
    if (trace_) {
      for (const OpenPhase& o : open_)
        trace_->complete(to_string(o.phase), "phase", o.host_begin, now, {{"step", step_}, {"aborted", true}});
      for (const ClosedPhase& c : closed_)
        trace_->complete(to_string(c.phase), "phase", c.host_begin, c.host_end, {{"step", step_}});
      close_trace_step(now, true);
    }
    in_step_ = false;
  }
  const Sample last = sampler_->sample_now();  // the window's last edge
  const Utilization util =
      summarize_utilization(sampler_->samples_since(window_begin_), sampler_->source(), sampler_->sample_hz(),
                            window_begin_, last.at);
  trial.findings.utilization = util;
  if (options_.training && !trace_) sampler_->discard_before(last.at);  // a long run's memory stays bounded

  if (!step_ms_.empty()) {
    PhaseTimes phases;
    for (int i = 0; i < kPhaseCount; ++i)
      phases.ms.emplace_back(to_string(kPhases[i]), monitor_detail::round3(mean(phase_ms_[static_cast<size_t>(i)])));
    trial.findings.phases = std::move(phases);
  }
  if (trial.ok() && !step_ms_.empty())
    trial.findings.bottleneck = bottleneck_finding(classify_bottleneck(step_profile(util), options_.thresholds));
  const double trial_s = std::chrono::duration<double>(now - trial_begin_).count();
  const double sampler_s = sampler_->own_cpu_s() - sampler_cpu_at_begin_;
  // every warm-up step's hook time plus the timed steps' estimated from those that timed themselves
  const double hooks_total_s =
      hooks_s_ - hooks_timed_s_ +
      (accounted_timed_ > 0 ? hooks_timed_s_ / static_cast<double>(accounted_timed_) * static_cast<double>(timed_this_trial_)
                            : 0.0);
  trial.findings.monitor_overhead = MonitorOverhead{
      steps_this_trial_ > 0 ? monitor_detail::round3(1e6 * hooks_total_s / static_cast<double>(steps_this_trial_)) : 0.0,
      monitor_detail::round3(1000.0 * sampler_s), trial_s > 0 ? sampler_s / trial_s : 0.0};
  if (trace_) {
    nlohmann::json args = {{"batch", batch_}, {"status", to_string(trial.status)}};
    if (trial.findings.bottleneck) args["bottleneck"] = trial.findings.bottleneck->verdict;
    if (options_.training)
      trace_->complete("window", "window", trial_begin_, now, std::move(args));
    else
      trace_->complete("trial batch " + std::to_string(batch_), "trial", trial_begin_, now, std::move(args));
  }
}

void MonitorObserver::finish() {
  if (finished_) return;
  finished_ = true;
  sampler_->stop();
  if (trace_) {
    trace_->add_samples(sampler_->samples());
    trace_->write(options_.trace_path);
  }
}

}  // namespace saturate

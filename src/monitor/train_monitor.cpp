#include "saturate/monitor/train_monitor.h"

#include <nlohmann/json.hpp>
#include "monitor/readings.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "saturate/monitor/bottleneck.h"

namespace saturate {
namespace {

/// The share of the windows' time one verdict must hold to be the run's (else: borderline).
constexpr double kRunVerdictTimeShare = 2.0 / 3.0;

/// The run's utilization from its windows' (which tile the run): sample counts add, min/max
/// take the extremes, means are weighted by samples — except cpu_percent's, exact per window
/// (CPU time over wall time), weighted by the window's time, which keeps it exact.
std::optional<Utilization> merge_utilization(const std::vector<MonitorWindow>& windows) {
  std::optional<Utilization> out;
  struct Acc {
    double weighted = 0, weight = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
  };
  std::map<std::string, Acc> acc;
  for (const MonitorWindow& w : windows) {
    if (!w.findings.utilization) continue;
    const Utilization& u = *w.findings.utilization;
    if (!out) {
      out.emplace();
      out->source = u.source;
      out->sample_hz = u.sample_hz;
    }
    const int64_t n = u.samples;
    out->samples += n;
    for (const SampleField& f : sample_fields()) {
      const UtilizationStat* v = u.field(f.name);
      if (!v) continue;
      Acc& a = acc[f.name];
      const double weight = f.member == &Sample::cpu_percent ? w.seconds : static_cast<double>(n);
      a.weighted += v->mean * weight;
      a.weight += weight;
      a.lo = std::min(a.lo, v->min);
      a.hi = std::max(a.hi, v->max);
    }
  }
  if (!out) return out;
  for (const SampleField& f : sample_fields()) {
    auto it = acc.find(f.name);
    if (it == acc.end() || it->second.weight <= 0) continue;
    out->fields.push_back({f.name, UtilizationStat{it->second.weighted / it->second.weight, it->second.lo, it->second.hi}});
  }
  return out;
}

double step_ms_of(const MonitorWindow& w) {
  return w.findings.bottleneck ? w.findings.bottleneck->evidence.value("step_ms", 0.0) : 0.0;
}

}  // namespace

std::string MonitorWindow::verdict() const {
  return findings.bottleneck ? findings.bottleneck->verdict : "";
}

namespace {
MonitorOptions for_training(MonitorOptions o) {
  o.training = true;
  return o;
}
}  // namespace

TrainMonitor::TrainMonitor(TrainMonitorOptions options)
    : options_(std::move(options)), monitor_(for_training(options_.monitor)) {
  options_.window_min_steps = std::max(1, options_.window_min_steps);
  options_.window_max_steps = std::max(options_.window_min_steps, options_.window_max_steps);
  run_begin_ = std::chrono::steady_clock::now();
}

TrainMonitor::~TrainMonitor() = default;

void TrainMonitor::open_window(int64_t first_step) {
  monitor_.trial_begin(options_.global_batch);
  window_open_ = true;
  first_step_ = last_step_ = first_step;
  timed_steps_ = steps_ = 0;
  window_begin_ = std::chrono::steady_clock::now();
}

void TrainMonitor::close_window() {
  const auto t0 = std::chrono::steady_clock::now();
  Trial t;
  t.batch = options_.global_batch;
  t.status = TrialStatus::kOk;
  t.steps = steps_;
  monitor_.trial_end(t);
  MonitorWindow w;
  w.first_step = first_step_;
  w.last_step = last_step_;
  w.timed_steps = timed_steps_;
  w.start_s = std::chrono::duration<double>(window_begin_ - run_begin_).count();
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_begin_).count();
  w.findings = std::move(t.findings);
  windows_.push_back(std::move(w));
  window_open_ = false;
  close_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void TrainMonitor::step_begin(int step, bool measured) {
  if (!window_open_) open_window(step);
  monitor_.step_begin(step, measured);
}

void TrainMonitor::step_end(int step, bool measured) {
  monitor_.step_end(step, measured);
  ++steps_;
  if (measured) ++timed_steps_;
  last_step_ = step;
  if (timed_steps_ < options_.window_min_steps) return;
  // the step's own end time: no clock read here
  if (timed_steps_ >= options_.window_max_steps ||
      std::chrono::duration<double>(monitor_.last_step_end() - window_begin_).count() >= options_.window_s)
    close_window();
}

namespace {

/// Windows that disagree, none holding two thirds of the time: the run is borderline between what
/// they found (not whichever held longest by a little).
void mark_disagreement(BottleneckFinding& b, const std::map<std::string, double>& time_of, double verdict_s,
                       const std::vector<MonitorWindow>& windows, bool cuda, bool mixed_precision) {
  std::vector<std::pair<std::string, double>> by_time(time_of.begin(), time_of.end());
  std::sort(by_time.begin(), by_time.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  std::vector<Bottleneck> between;
  const auto add = [&between](Bottleneck k) {
    if (std::find(between.begin(), between.end(), k) == between.end()) between.push_back(k);
  };
  std::string split;
  for (const auto& [v, t] : by_time) {
    split += fmt::format("{}{} {:.0f} %", split.empty() ? "" : ", ", v, 100.0 * t / verdict_s);
    if (v != to_string(Bottleneck::kBorderline)) {
      add(parse_bottleneck(v));
      continue;
    }
    for (const MonitorWindow& w : windows)  // a borderline window adds what it lay between
      if (w.verdict() == v)
        for (const std::string& k : w.findings.bottleneck->between) add(parse_bottleneck(k));
  }
  b.verdict = to_string(Bottleneck::kBorderline);
  b.between.clear();
  for (Bottleneck k : between) b.between.push_back(to_string(k));
  b.reason = fmt::format("borderline: the windows disagree ({} of the time); none held {:.0f} %", split,
                         100.0 * kRunVerdictTimeShare);
  b.fix = borderline_fix(between, cuda, mixed_precision);
}

/// The verdict that held for the most time; its evidence from its median window by step time.
std::optional<BottleneckFinding> run_verdict(const std::vector<MonitorWindow>& windows, double seconds, bool cuda,
                                             bool mixed_precision) {
  std::map<std::string, double> time_of;
  std::map<std::string, int> count_of;
  for (const MonitorWindow& w : windows) {
    const std::string v = w.verdict();
    if (v.empty()) continue;
    time_of[v] += w.seconds;
    ++count_of[v];
  }
  if (time_of.empty()) return std::nullopt;
  const auto top = std::max_element(time_of.begin(), time_of.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<const MonitorWindow*> held;
  for (const MonitorWindow& w : windows)
    if (w.verdict() == top->first) held.push_back(&w);
  std::sort(held.begin(), held.end(),
            [](const MonitorWindow* a, const MonitorWindow* b) { return step_ms_of(*a) < step_ms_of(*b); });
  const MonitorWindow& rep = *held[(held.size() - 1) / 2];
  BottleneckFinding b = *rep.findings.bottleneck;
  const size_t with_verdict = static_cast<size_t>(
      std::count_if(windows.begin(), windows.end(), [](const MonitorWindow& w) { return !w.verdict().empty(); }));
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [v, n] : count_of) counts[v] = n;
  b.evidence["windows"] = {{"count", with_verdict},
                           {"verdicts", counts},
                           {"time_share", seconds > 0 ? monitor_detail::round3(top->second / seconds) : 0.0},
                           {"representative_steps", {rep.first_step, rep.last_step}}};
  if (with_verdict > 1)
    b.reason = fmt::format("{} (in {} of {} windows, {:.0f} % of the time)", b.reason, count_of[top->first],
                           with_verdict, seconds > 0 ? 100.0 * top->second / seconds : 0.0);
  double verdict_s = 0;
  for (const auto& [v, t] : time_of) verdict_s += t;
  if (time_of.size() > 1 && verdict_s > 0 && top->second < kRunVerdictTimeShare * verdict_s)
    mark_disagreement(b, time_of, verdict_s, windows, cuda, mixed_precision);
  return b;
}

}  // namespace

const TrainMonitorSummary& TrainMonitor::finish() {
  if (finished_) return summary_;
  finished_ = true;
  if (window_open_ && steps_ > 0) close_window();
  monitor_.finish();

  TrainMonitorSummary out;
  // phases: the mean per timed step of the whole run
  int64_t timed = 0, steps = 0;
  std::map<std::string, double> phase_sum;
  double hooks_us = 0, sampler_ms = 0, seconds = 0;
  for (const MonitorWindow& w : windows_) {
    steps += w.last_step - w.first_step + 1;
    seconds += w.seconds;
    if (const auto& o = w.findings.monitor_overhead) {
      hooks_us += o->hooks_us_per_step * static_cast<double>(w.last_step - w.first_step + 1);
      sampler_ms += o->sampler_cpu_ms;
    }
    if (w.timed_steps == 0 || !w.findings.phases) continue;
    timed += w.timed_steps;
    for (const auto& [name, v] : w.findings.phases->ms) phase_sum[name] += v * static_cast<double>(w.timed_steps);
  }
  if (timed > 0) {
    PhaseTimes phases;
    for (Phase p : {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward, Phase::kBackward, Phase::kOptimizer,
                    Phase::kAllreduce})
      phases.ms.emplace_back(to_string(p), monitor_detail::round3(phase_sum[to_string(p)] / static_cast<double>(timed)));
    out.phases = std::move(phases);
  }
  out.utilization = merge_utilization(windows_);

  out.bottleneck = run_verdict(windows_, seconds, options_.monitor.cuda, options_.monitor.mixed_precision);
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_begin_).count();
  out.overhead = RunMonitorOverhead{steps > 0 ? monitor_detail::round3(hooks_us / static_cast<double>(steps)) : 0.0, monitor_detail::round3(sampler_ms),
                                    run_s > 0 ? sampler_ms / 1000.0 / run_s : 0.0, windows_.size(), monitor_detail::round3(1000.0 * close_s_)};
  out.windows = windows_;
  summary_ = std::move(out);
  return summary_;
}

nlohmann::json to_json(const TrainMonitorSummary& s) {
  nlohmann::json out = nlohmann::json::object();
  if (s.phases) out["phases_ms"] = to_json(*s.phases);
  if (s.utilization) out["utilization"] = to_json(*s.utilization);
  if (s.bottleneck) out["bottleneck"] = to_json(*s.bottleneck);
  nlohmann::json over_time = nlohmann::json::array();  // the run window by window
  for (const MonitorWindow& w : s.windows) {
    nlohmann::json x = {{"first_step", w.first_step}, {"last_step", w.last_step}, {"timed_steps", w.timed_steps},
                        {"start_s", monitor_detail::round3(w.start_s)}, {"seconds", monitor_detail::round3(w.seconds)}};
    if (w.findings.utilization) x["utilization"] = to_json(*w.findings.utilization);
    if (!w.verdict().empty()) x["verdict"] = w.verdict();
    over_time.push_back(std::move(x));
  }
  out["monitor_windows"] = std::move(over_time);
  out["monitor_overhead"] = {{"hooks_us_per_step", s.overhead.hooks_us_per_step},
                             {"sampler_cpu_ms", s.overhead.sampler_cpu_ms},
                             {"sampler_cpu_share", s.overhead.sampler_cpu_share},
                             {"windows", s.overhead.windows},
                             {"window_close_ms", s.overhead.window_close_ms}};
  return out;
}

std::string TrainMonitor::status_text() {
  if (window_open_ && !finished_ && timed_steps_ >= options_.window_min_steps &&
      (windows_.empty() ||
       std::chrono::duration<double>(monitor_.last_step_end() - window_begin_).count() >= options_.progress_window_s))
    close_window();
  std::string text;
  Sample s;
  if (monitor_.sampler().latest(&s)) {
    const auto num = [](double v, const char* spec) {
      return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(spec), v);
    };
    constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
    if (monitor_.sampler().source() == "nvml")
      text = fmt::format("gpu {} % mem {} % {}/{} GiB", num(s.gpu_util_percent, "{:.0f}"),
                         num(s.mem_util_percent, "{:.0f}"), num(s.mem_used_bytes / kGiB, "{:.1f}"),
                         num(s.mem_total_bytes / kGiB, "{:.0f}"));
    else
      text = fmt::format("cpu {} % rss {} MiB", num(s.cpu_percent, "{:.0f}"), num(s.rss_bytes / kMiB, "{:.0f}"));
  }
  for (auto it = windows_.rbegin(); it != windows_.rend(); ++it) {
    const std::string v = it->verdict();
    if (v.empty()) continue;
    text += (text.empty() ? "" : ", ") + v;
    break;
  }
  return text;
}

}  // namespace saturate

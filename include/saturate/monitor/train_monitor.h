// Implements: the monitor of a training run (`saturate train`). The Trainer calls its step and
// phase hooks (a PhaseObserver); it times them with a MonitorObserver — the same timing,
// launch estimate, sampling and verdict code as a probe's trial — over consecutive windows of
// steps (a window closes once it has `window_min_steps` timed steps and lasted `window_s`
// seconds or a progress line asks, or at `window_max_steps`), so that each window gets its own
// verdict from its own median step, and a long run's verdict is the one that held for most of
// its time. finish() gives the train JSON's `phases_ms`, `utilization`, `bottleneck` and
// `monitor_overhead`.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/monitor/monitor_observer.h"
#include "saturate/step/phase_observer.h"

namespace saturate {

struct TrainMonitorOptions {
  MonitorOptions monitor;
  double window_s = 5;
  int window_min_steps = 5;
  /// Bounds a window's per-step arrays (9 doubles a step) when steps are very short.
  int window_max_steps = 20000;
  /// A progress line closes a window only after this long (closing costs a few samples and a
  /// verdict, up to milliseconds on a loaded machine), except the run's first window.
  double progress_window_s = 1;
  /// Global batch per optimizer step (recorded in the trace's window events).
  int64_t global_batch = 0;
};

/// One closed window of the run.
struct MonitorWindow {
  int64_t first_step = 0, last_step = 0;
  int timed_steps = 0;
  double start_s = 0;  ///< when it opened, seconds after the run's start
  double seconds = 0;
  /// MonitorObserver's findings for it: phases, utilization, bottleneck, monitor_overhead.
  TrialFindings findings;
  std::string verdict() const;  ///< "" without one
};

/// What the monitor's own cost was over the run.
struct RunMonitorOverhead {
  double hooks_us_per_step = 0;
  double sampler_cpu_ms = 0;
  double sampler_cpu_share = 0;
  size_t windows = 0;
  double window_close_ms = 0;
};

/// The run's findings: phases the mean per timed step, utilization merged over the windows, the
/// verdict that held for the most time (its evidence from that verdict's median window, plus
/// `windows`: the count of each), the monitor's cost, and the windows themselves.
struct TrainMonitorSummary {
  std::optional<PhaseTimes> phases;
  std::optional<Utilization> utilization;
  std::optional<BottleneckFinding> bottleneck;
  RunMonitorOverhead overhead;
  std::vector<MonitorWindow> windows;
};
/// The train JSON's keys: phases_ms, utilization, bottleneck, monitor_overhead, monitor_windows
/// (each window's steps, start, length, utilization and verdict: the run over time).
nlohmann::json to_json(const TrainMonitorSummary& s);

class TrainMonitor final : public PhaseObserver {
 public:
  explicit TrainMonitor(TrainMonitorOptions options);
  ~TrainMonitor() override;

  void step_begin(int step, bool measured) override;
  void phase_begin(Phase phase) override { monitor_.phase_begin(phase); }
  void phase_end(Phase phase) override { monitor_.phase_end(phase); }
  void step_end(int step, bool measured) override;
  void phase_moved(Phase phase, Phase within, double ms) override { monitor_.phase_moved(phase, within, ms); }

  /// Closes the last window, stops the sampler, writes the trace (throws RuntimeFailure when
  /// it cannot) and returns the run's findings (TrainMonitorSummary; later calls return it again).
  const TrainMonitorSummary& finish();
  /// For a progress line: "cpu 99 % rss 312 MiB, compute-bound" (GPU: "gpu 97 % mem 41 % 12.1/80 GiB,
  /// ..."): the latest sample and the latest window's verdict. Closes the current window first
  /// when it has `window_min_steps` timed steps and is the first or has lasted
  /// `progress_window_s` (so a line speaks for the steps since an earlier line).
  std::string status_text();
  const std::vector<MonitorWindow>& windows() const { return windows_; }
  std::string nvml_note() const { return monitor_.nvml_note(); }

 private:
  void open_window(int64_t first_step);
  void close_window();

  TrainMonitorOptions options_;
  MonitorObserver monitor_;
  std::vector<MonitorWindow> windows_;
  bool window_open_ = false;
  bool finished_ = false;
  int64_t first_step_ = 0, last_step_ = 0;
  int timed_steps_ = 0, steps_ = 0;
  std::chrono::steady_clock::time_point window_begin_, run_begin_;
  TrainMonitorSummary summary_;
  double close_s_ = 0;  // time spent closing windows (summaries, verdicts): the monitor's cost too
};

}  // namespace saturate

// Implements: the probe observer that explains a trial. It times each step phase (host clock
// on CPU, CUDA events on GPU), estimates launch overhead, runs the device sampler and, at the
// end of each trial, writes into the trial JSON:
//   phases_ms   {data_wait, h2d, forward, backward, optimizer, allreduce} (mean per timed step)
//   utilization {source: nvml|proc, samples, sample_hz, <value>: {mean, min, max}, ...}
//   bottleneck  {verdict, reason, evidence, fix}
//   monitor_overhead {hooks_us_per_step, sampler_cpu_ms, sampler_cpu_share}
// and, with a trace path, records trials, steps and phases for a Chrome trace.
#pragma once
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "saturate/monitor/bottleneck.h"
#include "saturate/monitor/launch_counter.h"
#include "saturate/monitor/phase_clock.h"
#include "saturate/monitor/sampler.h"
#include "saturate/monitor/trace.h"
#include "saturate/probe/probe_hooks.h"

namespace saturate {

struct MonitorOptions {
  /// Device samples per second while trials run (0: only at each trial's start and end).
  double sample_hz = 10;
  /// Time phases with CUDA events and sample GPU `device_index` through NVML.
  bool cuda = false;
  int device_index = 0;
  /// The step runs in bf16 or fp16: the fixes do not offer mixed precision.
  bool mixed_precision = false;
  /// Estimate launch overhead (CPU: count ops on a warm-up step; GPU: host vs device time).
  bool measure_launch = true;
  /// Record a Chrome trace (written by finish()).
  std::string trace_path;
  /// NVML library override ("" : $SATURATE_NVML_LIBRARY or libnvidia-ml.so.1).
  std::string nvml_path;
  BottleneckThresholds thresholds;
  /// Windows of a training run rather than probe trials (TrainMonitor): the op count of a
  /// warm-up step is kept across windows (only unmeasured steps are counted again), trace
  /// events are named "window", and samples older than the last window are dropped when no
  /// trace is written (a long run's memory stays bounded).
  bool training = false;
};

class MonitorObserver final : public ProbeObserver {
 public:
  explicit MonitorObserver(MonitorOptions options);
  ~MonitorObserver() override;

  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void phase_begin(Phase phase) override;
  void phase_end(Phase phase) override;
  void step_end(int step, bool measured) override;
  void phase_moved(Phase phase, Phase within, double ms) override;
  void trial_end(Trial& trial) override;

  /// Stops the sampler and writes the trace when asked for (throws RuntimeFailure when the
  /// file cannot be written). Idempotent.
  void finish();
  const Sampler& sampler() const { return *sampler_; }
  /// Why NVML is not used on a CUDA run (for a warning); empty otherwise.
  std::string nvml_note() const;
  TraceWriter* trace() { return trace_.get(); }
  /// When the last step_end was called (its own clock reading; TrainMonitor's windows use it).
  std::chrono::steady_clock::time_point last_step_end() const { return last_step_end_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct OpenPhase {
    Phase phase;
    Clock::time_point host_begin;
    int mark_begin;
  };
  struct ClosedPhase {
    Phase phase;
    Clock::time_point host_begin, host_end;
    int mark_begin, mark_end;
  };
  void close_trace_step(Clock::time_point end, bool aborted);
  /// A trial's timed steps as the bottleneck's input: each cause's median share on the median step.
  StepProfile step_profile(const Utilization& util) const;
  /// The launch overhead's share of the compute, and how it was measured (options_.measure_launch).
  void measure_launch(StepProfile& p) const;

  MonitorOptions options_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<PhaseClock> clock_;
  std::unique_ptr<TraceWriter> trace_;
  OpCounter counter_;
  double per_op_us_ = 0;
  bool finished_ = false;

  // the current trial
  int64_t batch_ = 0;
  Clock::time_point trial_begin_, window_begin_;
  double sampler_cpu_at_begin_ = 0;
  double system_cpu_at_begin_s_ = 0, cpu_at_begin_s_ = 0;  ///< the process's, from getrusage
  int64_t page_faults_at_begin_ = 0;
  Clock::time_point kernel_at_{};  ///< when those were read (the first timed step's begin)
  double hooks_s_ = 0;
  static constexpr int64_t kAccountEvery = 16;
  bool account_ = true;  // this step's hooks time themselves
  // this trial/window: hook time of the timed steps that timed themselves, and counts
  double hooks_timed_s_ = 0, hooks_at_step_begin_ = 0;
  int64_t accounted_timed_ = 0, steps_this_trial_ = 0, timed_this_trial_ = 0;
  int64_t steps_seen_ = 0;
  Clock::time_point last_step_end_;
  int step_ = -1;
  bool measured_ = false;
  bool in_step_ = false;
  Clock::time_point step_begin_;
  std::vector<OpenPhase> open_;
  std::vector<ClosedPhase> closed_;
  std::array<double, 6> moved_ms_{};  // phase_moved this step, by phase (added to the clock's)
  int64_t ops_counted_ = -1;
  bool ops_on_timed_step_ = false;
  // per timed step
  std::vector<double> step_ms_, compute_ms_, host_issue_ms_;
  std::vector<std::vector<double>> phase_ms_;  // [phase][step]
};

}  // namespace saturate

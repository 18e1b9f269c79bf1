// Implements: the time left of a training run for its progress lines, from the recent pace: the
// steps and wall time of a sliding window (the last `window_s` seconds, at least two points), so
// a run that slows down (a bigger batch, a busy machine, evaluations) is estimated at its
// current pace, not its average since the start. Time points are given, not read, so tests can
// drive it. Observations closer than `burst_s` to the first of their group are one point, the
// group's last: the trainer reads losses in bursts (every --loss-every steps, then on_step for
// each), so ten steps may be reported within microseconds of each other although they took ten
// steps' time; the group's last step is what was done by then.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

namespace saturate {

class EtaEstimator {
 public:
  using Clock = std::chrono::steady_clock;
  explicit EtaEstimator(double window_s = 30.0, double burst_s = 0.05) : window_s_(window_s), burst_s_(burst_s) {}

  /// `steps_done` optimizer steps were complete at time `at`.
  void observe(int64_t steps_done, Clock::time_point at);
  /// Steps per second over the window; empty until two points span some time.
  std::optional<double> steps_per_s() const;
  /// Seconds until `total_steps` are done at that pace; empty without a pace.
  std::optional<double> seconds_left(int64_t total_steps) const;

 private:
  double window_s_;
  double burst_s_;
  std::deque<std::pair<int64_t, Clock::time_point>> points_;
  Clock::time_point group_begin_;  ///< when the newest point's group began
};

/// "45s", "3m12s", "2h05m", "3d04h": a duration for people, to the second below an hour.
std::string format_duration(double seconds);

}  // namespace saturate

#include "train/eta.h"

#include <cmath>

#include <fmt/format.h>

namespace saturate {

void EtaEstimator::observe(int64_t steps_done, Clock::time_point at) {
  if (!points_.empty() && std::chrono::duration<double>(at - group_begin_).count() < burst_s_) {
    points_.back() = {steps_done, at};  // the same burst: its last step was done by now
    return;
  }
  points_.emplace_back(steps_done, at);
  group_begin_ = at;
  // keep the newest point older than the window, so the window always spans window_s
  while (points_.size() > 2 && std::chrono::duration<double>(at - points_[1].second).count() >= window_s_)
    points_.pop_front();
}

std::optional<double> EtaEstimator::steps_per_s() const {
  if (points_.size() < 2) return std::nullopt;
  const double dt = std::chrono::duration<double>(points_.back().second - points_.front().second).count();
  const int64_t ds = points_.back().first - points_.front().first;
  if (dt <= 0 || ds <= 0) return std::nullopt;
  return static_cast<double>(ds) / dt;
}

std::optional<double> EtaEstimator::seconds_left(int64_t total_steps) const {
  const auto rate = steps_per_s();
  if (!rate) return std::nullopt;
  const int64_t left = std::max<int64_t>(0, total_steps - points_.back().first);
  return static_cast<double>(left) / *rate;
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

}  // namespace saturate

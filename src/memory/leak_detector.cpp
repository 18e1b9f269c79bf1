#include "saturate/memory/leak_detector.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace saturate {

LeakDetector::LeakDetector(LeakOptions options) : options_(options) {}

void LeakDetector::observe(int64_t step, int64_t allocated_bytes) { samples_.emplace_back(step, allocated_bytes); }

LeakReport LeakDetector::report() const {
  LeakReport r;
  r.steps = static_cast<int64_t>(samples_.size());
  if (samples_.empty()) return r;
  r.last_bytes = samples_.back().second;
  const size_t warm = static_cast<size_t>(std::max(options_.warmup_steps, 0));
  if (samples_.size() <= warm) return r;
  // the level once warm: after the last warm-up step (or the first sample when there is none).
  const size_t w = warm > 0 ? warm - 1 : 0;
  r.warm_bytes = samples_[w].second;
  // the growth start: the first step after which memory never returned to the warm level.
  const int64_t tolerance = options_.min_bytes_per_step;
  size_t start = samples_.size();
  for (size_t i = samples_.size(); i-- > w + 1;) {
    if (samples_[i].second - r.warm_bytes < tolerance) break;
    start = i;
  }
  if (start >= samples_.size()) return r;
  // mean growth per step from the level before the start to the end.
  const size_t base = start - 1;
  const int64_t grown = samples_.back().second - samples_[base].second;
  const int64_t span = samples_.back().first - samples_[base].first;
  const int64_t growth_steps = static_cast<int64_t>(samples_.size() - start);
  r.first_step = samples_[start].first;
  r.bytes_per_step = span > 0 ? static_cast<double>(grown) / static_cast<double>(span) : 0;
  // steady growth: enough steps, enough bytes per step, and most steps grew.
  int64_t growing = 0;
  for (size_t i = start; i < samples_.size(); ++i)
    if (samples_[i].second > samples_[i - 1].second) ++growing;
  r.detected = growth_steps >= options_.min_growth_steps && r.bytes_per_step >= options_.min_bytes_per_step &&
               2 * growing > growth_steps;
  if (!r.detected) {
    r.first_step = -1;
    r.bytes_per_step = 0;
  }
  return r;
}

bool LeakDetector::warn_once() {
  if (warned_) return false;
  if (!report().detected) return false;
  warned_ = true;
  return true;
}

nlohmann::json leak_json(const LeakReport& r) {
  return {{"detected", r.detected},     {"bytes_per_step", r.bytes_per_step}, {"first_step", r.first_step},
          {"steps", r.steps},           {"warm_bytes", r.warm_bytes},         {"last_bytes", r.last_bytes}};
}

}  // namespace saturate

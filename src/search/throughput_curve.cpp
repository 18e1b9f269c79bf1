#include "saturate/search/throughput_curve.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::vector<int64_t> curve_batches(int64_t min_batch, int64_t max_batch, int points_per_doubling) {
  if (min_batch < 1 || max_batch < min_batch)
    throw UsageError("max_batch", fmt::format("a throughput curve from batch {} to {}: give 1 <= min <= max", min_batch,
                                              max_batch));
  if (points_per_doubling < 1 || points_per_doubling > 8)
    throw UsageError("points_per_doubling", fmt::format("{} is outside 1..8", points_per_doubling));
  std::vector<int64_t> out;
  const double step = std::pow(2.0, 1.0 / points_per_doubling);
  for (double b = static_cast<double>(min_batch); b < static_cast<double>(max_batch) * (1 - 1e-9); b *= step) {
    const auto rounded = static_cast<int64_t>(std::llround(b));
    if (out.empty() || rounded > out.back()) out.push_back(rounded);
  }
  if (out.empty() || out.back() != max_batch) out.push_back(max_batch);
  return out;
}

int64_t knee_batch(const std::vector<ThroughputPoint>& points, double fraction) {
  double best = 0;
  for (const auto& p : points)
    if (p.ok) best = std::max(best, p.samples_per_s);
  for (const auto& p : points)  // ascending batch
    if (p.ok && p.samples_per_s >= fraction * best) return p.batch;
  return 0;
}

ThroughputCurve measure_throughput_curve(TrialRunner& runner, const ThroughputCurveOptions& o) {
  if (o.min_rounds < 2 || o.max_rounds < o.min_rounds || o.max_rounds > 100)
    throw UsageError("rounds", fmt::format("rounds {}..{}: give 2 <= min <= max <= 100 (a spread needs two)",
                                           o.min_rounds, o.max_rounds));
  if (o.measure_steps < 1 || o.warmup_steps < 0)
    throw UsageError("measure_steps", fmt::format("{} timed and {} warm-up steps per round: give at least one timed",
                                                  o.measure_steps, o.warmup_steps));
  if (!(o.knee_fraction > 0 && o.knee_fraction <= 1))
    throw UsageError("knee_fraction", fmt::format("{} is outside (0, 1]; e.g. 0.9: within 10 % of the best", o.knee_fraction));
  if (!(o.spread_target > 0))
    throw UsageError("spread_target", fmt::format("{} must be above 0; e.g. 0.02 for 2 %", o.spread_target));
  const auto started = std::chrono::steady_clock::now();
  ThroughputCurve curve;
  curve.knee_fraction = o.knee_fraction;
  for (const int64_t batch : curve_batches(o.min_batch, o.max_batch, o.points_per_doubling)) {
    ThroughputPoint p;
    p.batch = batch;
    p.ok = true;
    while (p.rounds < o.max_rounds) {
      const Trial t = runner.run(batch, {o.warmup_steps, o.measure_steps, 0});
      curve.trial_steps += t.steps;
      if (!t.ok() || !(t.samples_per_s > 0)) {
        p.ok = false;
        p.error = t.error.empty() ? to_string(t.status) : t.error;
        break;
      }
      p.round_samples_per_s.push_back(t.samples_per_s);
      ++p.rounds;
      double sum = 0;
      for (double v : p.round_samples_per_s) sum += v;
      p.samples_per_s = sum / p.rounds;
      double sq = 0;
      for (double v : p.round_samples_per_s) sq += (v - p.samples_per_s) * (v - p.samples_per_s);
      p.stddev = p.rounds > 1 ? std::sqrt(sq / (p.rounds - 1)) : 0;
      p.rel_std_error = p.stddev / std::sqrt(static_cast<double>(p.rounds)) / p.samples_per_s;
      p.settled = p.rounds >= o.min_rounds && p.rel_std_error <= o.spread_target;
      if (p.settled) break;
    }
    curve.points.push_back(p);
    if (o.on_point) o.on_point(p);
    // an error at the bottom, before any point ran (BatchNorm refuses a batch of 1), is not the
    // top: the next batch may run. Past a point that ran, a failure is the curve's end.
    const bool bottom_error = !p.ok && curve.best_batch == 0 && p.error != to_string(TrialStatus::kOom) &&
                              p.error.find("out of memory") == std::string::npos;
    if (!p.ok && !bottom_error) break;  // a larger batch will not fit either
    if (p.samples_per_s > curve.best_samples_per_s) {
      curve.best_samples_per_s = p.samples_per_s;
      curve.best_batch = batch;
    }
  }
  curve.knee_batch = knee_batch(curve.points, o.knee_fraction);
  curve.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return curve;
}

}  // namespace saturate

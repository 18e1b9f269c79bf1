#include "saturate/search/throughput_curve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

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

double plateau_samples_per_s(const std::vector<ThroughputPoint>& points, double fraction) {
  // the settled points (all, when none settled): their best, then the median of those within
  // `fraction` of it. The best alone is the largest of many noisy numbers, biased up: on a flat top
  // it moved the bar by 3 % from run to run, enough to move the knee by two points
  // the settled points when one of the curve's larger half settled; else every point: with only
  // small batches settled, one of them was taken for the plateau (quiet, 2 threads, on a machine
  // whose speed drifted: only batch 4 of 14 settled, and the knee was 4)
  std::vector<const ThroughputPoint*> ran;
  for (const auto& p : points)
    if (p.ok) ran.push_back(&p);
  const bool top_settled = std::any_of(ran.begin() + static_cast<long>(ran.size() / 2), ran.end(),
                                       [](const ThroughputPoint* p) { return p->settled; });
  std::vector<double> values;
  for (const ThroughputPoint* p : ran)
    if (p->settled || !top_settled) values.push_back(p->samples_per_s);
  if (values.empty()) return 0;
  const double best = *std::max_element(values.begin(), values.end());
  std::vector<double> top;
  for (double v : values)
    if (v >= fraction * best) top.push_back(v);
  std::sort(top.begin(), top.end());
  const size_t n = top.size();
  return n % 2 ? top[n / 2] : 0.5 * (top[n / 2 - 1] + top[n / 2]);
}

void mark_dips(std::vector<ThroughputPoint>& points) {
  for (size_t i = 0; i < points.size(); ++i) {
    ThroughputPoint& p = points[i];
    p.dip = p.ok && i > 0 && i + 1 < points.size() && points[i - 1].ok && points[i + 1].ok &&
            p.samples_per_s < 0.8 * points[i - 1].samples_per_s && p.samples_per_s < points[i + 1].samples_per_s;
  }
}

int64_t knee_batch(const std::vector<ThroughputPoint>& points, double fraction) {
  const double bar = fraction * plateau_samples_per_s(points, fraction);
  // a dip counts as its neighbours' geometric mean (mark_dips)
  const auto speed = [&](size_t i) {
    return points[i].dip ? std::sqrt(points[i - 1].samples_per_s * points[i + 1].samples_per_s)
                         : points[i].samples_per_s;
  };
  for (size_t i = 0; i < points.size(); ++i) {  // ascending batch
    const ThroughputPoint& p = points[i];
    if (!p.ok || speed(i) < bar) continue;
    // never an unsettled point over a settled neighbour that reaches the bar too
    const bool settled_next = i + 1 < points.size() && points[i + 1].ok && points[i + 1].settled &&
                              speed(i + 1) >= bar;
    if (!p.settled && settled_next) continue;
    return p.batch;
  }
  return 0;
}

void summarize_rounds(ThroughputPoint& p, int min_rounds, double spread_target) {
  // load only slows a round down (another process takes the cores, never gives more): the step's
  // own speed is in its fastest rounds. The faster half, as a trimmed mean (timeit takes the
  // minimum; half keeps a spread to judge)
  std::vector<double> v = p.round_samples_per_s;
  std::sort(v.begin(), v.end(), std::greater<double>());
  p.rounds = static_cast<int>(v.size());
  const size_t kept = std::max<size_t>(std::min<size_t>(2, v.size()), (v.size() + 1) / 2);
  double sum = 0;
  for (size_t i = 0; i < kept; ++i) sum += v[i];
  p.samples_per_s = kept ? sum / static_cast<double>(kept) : 0;
  double sq = 0;
  for (size_t i = 0; i < kept; ++i) sq += (v[i] - p.samples_per_s) * (v[i] - p.samples_per_s);
  p.stddev = kept > 1 ? std::sqrt(sq / static_cast<double>(kept - 1)) : 0;
  p.rel_std_error = p.samples_per_s > 0 ? p.stddev / std::sqrt(static_cast<double>(kept)) / p.samples_per_s : 0;
  p.settled = p.rounds >= min_rounds && p.rel_std_error <= spread_target;
}

namespace {

void check_curve_options(const ThroughputCurveOptions& o) {
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
}

}  // namespace

ThroughputCurve measure_throughput_curve(TrialRunner& runner, const ThroughputCurveOptions& o) {
  check_curve_options(o);
  const auto started = std::chrono::steady_clock::now();
  ThroughputCurve curve;
  curve.knee_fraction = o.knee_fraction;
  // in passes: while any point is unsettled, a pass times one round of every point, in ascending
  // batch. A load that comes and goes (another job's phase) then slows a round of every point it
  // meets, not all the rounds of one point: with the rounds of a point back to back, a point's
  // every round could fall into a busy stretch and settle there (seen beside two CPU hogs: batch
  // 1024 settled at 66 % of its neighbours' speed, and the knee moved two points). Settled points
  // go on too: a machine whose speed changes after the first passes (on this VM a third slower,
  // quiet) otherwise times only the unsettled points at its new speed, and the knee moved by two
  for (const int64_t batch : curve_batches(o.min_batch, o.max_batch, o.points_per_doubling)) {
    ThroughputPoint p;
    p.batch = batch;
    p.ok = true;
    curve.points.push_back(p);
  }
  std::vector<int> steps_of(curve.points.size(), 0);  // each point's timed steps a round (0: not yet known)
  for (int round = 0; round < o.max_rounds + 1; ++round) {
    const bool unsettled = std::any_of(curve.points.begin(), curve.points.end(), [&](const ThroughputPoint& p) {
      return p.ok && !p.settled && p.rounds < o.max_rounds;
    });
    if (!unsettled) break;
    for (size_t i = 0; i < curve.points.size(); ++i) {
      ThroughputPoint& p = curve.points[i];
      if (!p.ok || p.rounds >= o.max_rounds) continue;
      const int steps = steps_of[i] > 0 ? steps_of[i] : o.measure_steps;
      const Trial t = runner.run(p.batch, {o.warmup_steps, steps, 0});
      curve.trial_steps += t.steps;
      if (!t.ok() || !(t.samples_per_s > 0)) {
        p.ok = false;
        p.error = t.error.empty() ? to_string(t.status) : t.error;
        // an error at the bottom, before any point ran (BatchNorm refuses a batch of 1), is not
        // the top: the next batch may run. Past a point that ran, a failure is the curve's end: a
        // larger batch will not fit either
        const bool ran_below = std::any_of(curve.points.begin(), curve.points.begin() + static_cast<long>(i),
                                           [](const ThroughputPoint& q) { return q.ok; });
        const bool bottom_error = !ran_below && p.round_samples_per_s.empty() && p.error != to_string(TrialStatus::kOom) &&
                                  p.error.find("out of memory") == std::string::npos;
        if (!bottom_error) {
          curve.points.resize(i + 1);
          break;
        }
        continue;
      }
      if (steps_of[i] == 0) {
        // a round is at least min_round_ms of timed steps, its speed their median: a round of two
        // 2 ms steps fits in one scheduler slice, and beside other busy processes all the rounds
        // of a point could fall on a shared core (seen: batch 512 and 1024 at half their
        // neighbours' speed, 3 rounds each, settled). A shorter first round is the calibration
        steps_of[i] = o.measure_steps;
        if (o.min_round_ms > 0 && t.step_time_ms > 0 && t.step_time_ms * o.measure_steps < o.min_round_ms) {
          steps_of[i] = static_cast<int>(std::min<double>(1000, std::ceil(o.min_round_ms / t.step_time_ms)));
          continue;
        }
      } else if (o.min_round_ms > 0 && steps_of[i] > o.measure_steps &&
                 t.step_time_ms * steps_of[i] > 2 * o.min_round_ms) {
        // the steps became slower than when the round was calibrated (a calibration that ran
        // while the machine was quiet, then load: seen, rounds of 1000 steps a point stretched a
        // rank's curve past 90 s while its peer waited): fewer steps from the next round on, so
        // a round stays about min_round_ms however the load changes
        steps_of[i] = std::max(o.measure_steps, static_cast<int>(std::ceil(o.min_round_ms / t.step_time_ms)));
      }
      const bool own = t.own_samples_per_s > 0;
      const double wait_share = own ? std::max(0.0, 1 - t.samples_per_s / t.own_samples_per_s) : 0;
      p.cpu_wait_share = (p.cpu_wait_share * static_cast<double>(p.round_samples_per_s.size()) + wait_share) /
                         static_cast<double>(p.round_samples_per_s.size() + 1);
      p.round_samples_per_s.push_back(own ? t.own_samples_per_s : t.samples_per_s);
      summarize_rounds(p, o.min_rounds, o.spread_target);
    }
  }
  for (const ThroughputPoint& p : curve.points)
    if (o.on_point) o.on_point(p);
  summarize_curve(curve);
  curve.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return curve;
}

void summarize_curve(ThroughputCurve& curve) {
  curve.best_samples_per_s = 0;
  curve.best_batch = 0;
  for (const ThroughputPoint& p : curve.points)
    if (p.ok && p.samples_per_s > curve.best_samples_per_s) {
      curve.best_samples_per_s = p.samples_per_s;
      curve.best_batch = p.batch;
    }
  mark_dips(curve.points);
  curve.knee_batch = knee_batch(curve.points, curve.knee_fraction);
  curve.plateau_samples_per_s = plateau_samples_per_s(curve.points, curve.knee_fraction);
}

ThroughputCurve with_allreduce(ThroughputCurve curve, int world_size, double allreduce_ms) {
  if (world_size < 1 || !(allreduce_ms >= 0))
    throw InternalError(fmt::format("with_allreduce: {} ranks, {} ms a step", world_size, allreduce_ms));
  const double world = world_size;
  const double comm_s = allreduce_ms / 1e3;
  for (ThroughputPoint& p : curve.points) {
    if (!p.ok || !(p.samples_per_s > 0)) continue;
    const double batch = static_cast<double>(p.batch);
    const auto job = [&](double rank_samples_per_s) {
      return rank_samples_per_s > 0 ? world * batch / (batch / rank_samples_per_s + comm_s) : 0.0;
    };
    // the spread: d(job)/d(rate) = world x share^2, share = the step's compute time over compute
    // + all-reduce; so the relative spread shrinks by `share`
    const double compute_s = batch / p.samples_per_s;
    const double share = compute_s / (compute_s + comm_s);
    p.compute_samples_per_s = p.samples_per_s;
    p.samples_per_s = job(p.samples_per_s);
    p.stddev *= world * share * share;
    p.rel_std_error *= share;
    for (double& r : p.round_samples_per_s) r = job(r);
  }
  curve.world_size = world_size;
  curve.allreduce_ms_per_step = allreduce_ms;
  summarize_curve(curve);
  return curve;
}

}  // namespace saturate

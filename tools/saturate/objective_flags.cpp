#include "objective_flags.h"
#include "flag_checks.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/dist/process_group.h"
#include "saturate/step/training_step.h"

namespace saturate::cli {

void add_objective_flags(CLI::App& app, ObjectiveFlags& f, bool base_batch_flag) {
  app.add_option("--objective", f.objective,
                 "memory: the largest batch under the target | throughput: the knee of the measured samples/s curve | "
                 "goodput: samples/s x statistical efficiency from the gradient noise scale (Pollux)")
      ->capture_default_str();
  app.add_option("--knee", f.knee_fraction,
                 "with --objective throughput: the smallest batch within this fraction of the best samples/s")->check(in_range(0.01, 1, "a fraction of the best samples/s"))
      ->capture_default_str();
  app.add_option("--noise-steps", f.noise_steps,
                 "with --objective goodput: steps that measure the gradient noise scale (learning rate 0, weights "
                 "put back)")->check(in_range(1, 1e6, "steps"))
      ->capture_default_str();
  if (base_batch_flag)
    app.add_option("--base-batch", f.base_batch,
                   "with --objective goodput: the batch the learning rate was tuned for (default 32)")->check(in_range(1, 2147483647.0, "a batch"));
}

Objective check_objective_flags(const ObjectiveFlags& f) {
  const Objective o = parse_objective(f.objective);
  if (!(f.knee_fraction > 0 && f.knee_fraction <= 1))
    throw UsageError(fmt::format("--knee: {} is outside (0, 1]; e.g. 0.9 for within 10 % of the best", f.knee_fraction));
  if (f.noise_steps < 1 || f.noise_steps > 10000)
    throw UsageError(fmt::format("--noise-steps: {} is outside 1..10000", f.noise_steps));
  if (f.base_batch < 0) throw UsageError(fmt::format("--base-batch: {} is negative; give the batch the learning rate "
                                                     "was tuned for",
                                                     f.base_batch));
  return o;
}

LrRule lr_rule_for(const Workload& workload) {
  return workload.optimizer_kind() == OptimizerKind::kSgd ? LrRule::kAdaScale : LrRule::kAdaScaleSqrt;
}

ObjectiveOutcome pick_by_objective(Probe& probe, const ObjectiveFlags& f, int64_t max_batch,
                                   const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                                   bool quiet) {
  ObjectiveOutcome out;
  out.objective = parse_objective(f.objective);
  out.batch = max_batch;
  if (out.objective == Objective::kMemory || max_batch <= 0) return out;
  ThroughputCurveOptions co;
  co.max_batch = max_batch;
  co.knee_fraction = f.knee_fraction;
  if (!quiet) {
    std::cerr << fmt::format("saturate: --objective {}: timing samples/s at log-spaced batches up to {}\n",
                             to_string(out.objective), max_batch);
    co.on_point = [](const ThroughputPoint& p) {
      if (p.ok)
        std::cerr << fmt::format("  curve batch {:>6}  {:>10.1f} samples/s  +-{:.1f} %  ({} rounds{})\n", p.batch,
                                 p.samples_per_s, 100 * p.rel_std_error, p.rounds, p.settled ? "" : ", not settled");
      else
        std::cerr << fmt::format("  curve batch {:>6}  failed: {}\n", p.batch, p.error);
    };
  }
  out.curve = measure_throughput_curve(probe, co);
  if (out.objective == Objective::kThroughput) {
    out.batch = out.curve->knee_batch;
    out.reason = fmt::format("batch {}: the smallest timed batch within {:.0f} % of the best samples/s ({:.0f} at batch "
                             "{}); a larger one adds memory, not speed",
                             out.batch, 100 * f.knee_fraction, out.curve->best_samples_per_s, out.curve->best_batch);
    return out;
  }
  const int64_t base = f.base_batch > 0 ? f.base_batch : std::min<int64_t>(32, max_batch);
  const int64_t noise_batch = std::max<int64_t>(2, std::min(base, max_batch));
  StepOptions so;
  const TrainingFootprint& fp = probe.footprint();
  so.precision = fp.precision;
  so.checkpointing = fp.checkpointing;
  so.fast_paths = fp.fast_paths;
  if (!quiet)
    std::cerr << fmt::format("saturate: measuring the gradient noise scale on {}: {} steps of batch {} in two halves\n",
                             data, f.noise_steps, noise_batch);
  out.noise = measure_noise_scale(probe.workload(), so, next_batch, noise_batch, 0, f.noise_steps);
  out.noise_data = data;
  out.goodput = choose_goodput_batch(*out.curve, out.noise->noise_scale, base, lr_rule_for(probe.workload()));
  out.batch = out.goodput->batch;
  out.reason = out.goodput->reason;
  return out;
}

ThroughputCurve mean_curve_across_ranks(ThroughputCurve curve, const ThroughputCurveOptions& options,
                                        DistGroup* group) {
  if (!group || group->world_size() <= 1) return curve;
  const std::vector<int64_t> planned = curve_batches(options.min_batch, options.max_batch, options.points_per_doubling);
  const size_t n = planned.size();
  std::vector<double> v(2 * n, 0.0);
  for (const auto& p : curve.points)
    for (size_t i = 0; i < n; ++i)
      if (planned[i] == p.batch && p.ok) {
        v[i] = p.samples_per_s;
        v[n + i] = 1;
      }
  const std::vector<double> sums = group->all_reduce_sum(v);
  const double world = group->world_size();
  ThroughputCurve out = curve;
  out.points.clear();
  out.best_samples_per_s = 0;
  out.best_batch = 0;
  for (size_t i = 0; i < n; ++i) {
    ThroughputPoint p;
    p.batch = planned[i];
    p.ok = sums[n + i] == world;
    if (!p.ok) {
      p.error = "failed on a rank (or not timed)";
      out.points.push_back(p);
      break;
    }
    p.samples_per_s = sums[i] / world;
    for (const auto& mine : curve.points)
      if (mine.batch == p.batch) {
        p.rounds = mine.rounds;
        p.rel_std_error = mine.rel_std_error;
        p.stddev = mine.stddev;
        p.settled = mine.settled;
      }
    if (p.samples_per_s > out.best_samples_per_s) {
      out.best_samples_per_s = p.samples_per_s;
      out.best_batch = p.batch;
    }
    out.points.push_back(p);
  }
  out.knee_batch = knee_batch(out.points, out.knee_fraction);
  return out;
}

nlohmann::json curve_json(const ThroughputCurve& c) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : c.points)
    points.push_back({{"batch", p.batch},
                      {"ok", p.ok},
                      {"samples_per_s", p.samples_per_s},
                      {"stddev", p.stddev},
                      {"rel_std_error", p.rel_std_error},
                      {"rounds", p.rounds},
                      {"settled", p.settled},
                      {"error", p.error}});
  return {{"points", points},       {"knee_batch", c.knee_batch}, {"knee_fraction", c.knee_fraction},
          {"best_batch", c.best_batch}, {"best_samples_per_s", c.best_samples_per_s},
          {"trial_steps", c.trial_steps}, {"seconds", c.seconds}};
}

nlohmann::json objective_json(const ObjectiveOutcome& o) {
  nlohmann::json j = {{"objective", to_string(o.objective)}, {"batch", o.batch}, {"reason", o.reason}};
  if (o.curve) j["throughput_curve"] = curve_json(*o.curve);
  if (o.noise)
    j["noise_scale"] = {{"value", o.noise->noise_scale ? nlohmann::json(*o.noise->noise_scale) : nlohmann::json()},
                        {"gradient_sq_norm", o.noise->gradient_sq_norm},
                        {"trace_covariance", o.noise->trace_covariance},
                        {"steps", o.noise->steps},
                        {"batch", o.noise->batch},
                        {"micro_batch", o.noise->micro_batch},
                        {"data", o.noise_data}};
  if (o.goodput) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : o.goodput->points)
      points.push_back({{"batch", p.batch}, {"samples_per_s", p.samples_per_s}, {"efficiency", p.efficiency},
                        {"goodput", p.goodput}});
    j["goodput"] = {{"batch", o.goodput->batch},
                    {"efficiency", o.goodput->efficiency},
                    {"lr_gain", o.goodput->lr_gain},
                    {"lr_rule", to_string(o.goodput->lr_rule)},
                    {"base_batch", o.goodput->base_batch},
                    {"points", points}};
  }
  return j;
}

}  // namespace saturate::cli

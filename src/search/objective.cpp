#include "saturate/search/objective.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"

namespace saturate {

void ObjectiveOptions::check() const {
  check_option_range("knee_fraction", knee_fraction);  // the documented ranges (core/option_doc.h)
  check_option_range("noise_steps", noise_steps);
  if (base_batch < 0)
    throw UsageError("base_batch",
                     fmt::format("{} is negative; give the batch the learning rate was tuned for", base_batch));
}

int64_t noise_batch_for(const ObjectiveOptions& options, int64_t max_batch) {
  const int64_t base = options.base_batch > 0 ? options.base_batch : std::min<int64_t>(kDefaultBaseBatch, max_batch);
  return std::max<int64_t>(2, std::min(base, max_batch));
}

ThroughputCurveOptions curve_options(const ObjectiveOptions& options, int64_t max_batch) {
  ThroughputCurveOptions co;
  co.max_batch = max_batch;
  co.knee_fraction = options.knee_fraction;
  return co;
}

ObjectiveOutcome pick_by_objective(TrialRunner& runner, const ObjectiveOptions& options, int64_t max_batch,
                                   const NoiseMeasure& noise, const std::string& noise_data,
                                   const ObjectiveProgress& progress, const ObjectiveRanks& ranks) {
  options.check();
  if (ranks.world_size > 1 && options.objective == Objective::kGoodput)
    throw InternalError("pick_by_objective: goodput across ranks (the callers refuse it)");
  ObjectiveOutcome out;
  out.objective = options.objective;
  out.requested = options.objective;
  out.batch = max_batch;
  if (out.objective == Objective::kMemory || max_batch <= 0) return out;
  ThroughputCurveOptions co = curve_options(options, max_batch);
  co.on_point = progress.on_point;
  if (progress.on_curve_start) progress.on_curve_start(out.objective, max_batch);
  out.curve = measure_throughput_curve(runner, co);
  if (ranks.world_size > 1) {
    if (ranks.combine) out.curve = ranks.combine(*out.curve);
    out.curve = with_allreduce(*out.curve, ranks.world_size, ranks.allreduce_ms);
  }
  if (out.curve->knee_batch <= 0) {  // no point ran: say why, never a silent batch 0
    const std::string why = out.curve->points.empty() ? std::string("no batch to time") : out.curve->points.front().error;
    throw RuntimeFailure(fmt::format("the throughput curve up to batch {} has no batch that ran (batch {}: {}); the "
                                     "step fails at every timed batch: fix the step, or use `objective` memory",
                                     max_batch, out.curve->points.empty() ? 0 : out.curve->points.front().batch, why));
  }
  const auto knee = [&] {
    out.objective = Objective::kThroughput;
    out.batch = out.curve->knee_batch;
    out.reason = fmt::format("batch {}: the smallest timed batch within {:.0f} % of the curve's plateau ({:.0f} "
                             "samples/s; best {:.0f} at batch {}); a larger one adds memory, not speed",
                             out.batch, 100 * options.knee_fraction, out.curve->plateau_samples_per_s,
                             out.curve->best_samples_per_s, out.curve->best_batch);
    if (ranks.world_size > 1 && ranks.step_collectives)
      out.reason += fmt::format("; samples/s of {} ranks, every timed step run on all of them together with its own "
                                "collectives (the gradients' all-reduce) in its time, the slowest rank's",
                                ranks.world_size);
    else if (ranks.world_size > 1)
      out.reason += fmt::format("; samples/s of {} ranks, each step with the gradients' all-reduce ({:.3g} ms "
                                "predicted{}{})",
                                ranks.world_size, ranks.allreduce_ms, ranks.network.empty() ? "" : " from ",
                                ranks.network);
  };
  if (out.requested == Objective::kThroughput) {
    knee();
    return out;
  }
  if (!noise) throw InternalError("pick_by_objective: goodput without a way to measure the noise scale");
  const int64_t base = options.base_batch > 0 ? options.base_batch : std::min<int64_t>(kDefaultBaseBatch, max_batch);
  const int64_t noise_batch = noise_batch_for(options, max_batch);
  if (progress.on_noise_start) progress.on_noise_start(noise_batch, options.noise_steps);
  out.noise = noise(noise_batch, options.noise_steps);
  out.noise_data = noise_data;
  if (!out.noise->noise_scale) {
    // a noise scale that is not measurable says nothing about statistical efficiency: taking it
    // as 1 would make goodput the throughput and scale the learning rate by the batch ratio on
    // no evidence. The curve, which was measured, chooses instead.
    knee();
    out.fallback = fmt::format("goodput not measurable: the gradient noise scale is not measurable after {} steps of "
                               "batch {} (|G|^2 estimate {:.3g}: the gradient is all noise); no learning-rate change",
                               out.noise->steps, out.noise->batch, out.noise->gradient_sq_norm);
    out.reason += "; " + out.fallback;
    return out;
  }
  out.goodput = choose_goodput_batch(*out.curve, out.noise->noise_scale, base, options.lr_rule);
  out.batch = out.goodput->batch;
  out.reason = out.goodput->reason;
  return out;
}

nlohmann::json to_json(const ThroughputCurve& c) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : c.points)
    points.push_back({{"batch", p.batch},
                      {"ok", p.ok},
                      {"samples_per_s", p.samples_per_s},
                      {"stddev", p.stddev},
                      {"rel_std_error", p.rel_std_error},
                      {"rounds", p.rounds},
                      {"settled", p.settled},
                      {"dip", p.dip},
                      {"cpu_wait_share", p.cpu_wait_share},
                      {"round_samples_per_s", p.round_samples_per_s},
                      {"error", p.error}});
  for (size_t i = 0; i < c.points.size() && c.world_size > 1; ++i)
    points[i]["compute_samples_per_s"] = c.points[i].compute_samples_per_s;
  return {{"points", points},       {"knee_batch", c.knee_batch}, {"knee_fraction", c.knee_fraction},
          {"best_batch", c.best_batch}, {"best_samples_per_s", c.best_samples_per_s},
          {"plateau_samples_per_s", c.plateau_samples_per_s},
          {"trial_steps", c.trial_steps}, {"seconds", c.seconds},
          {"world_size", c.world_size}, {"allreduce_ms_per_step", c.allreduce_ms_per_step}};
}

nlohmann::json to_json(const ObjectiveOutcome& o) {
  nlohmann::json j = {{"objective", to_string(o.objective)},
                      {"requested", to_string(o.requested)},
                      {"batch", o.batch},
                      {"reason", o.reason}};
  if (!o.fallback.empty()) j["fallback"] = o.fallback;
  if (o.curve) j["throughput_curve"] = to_json(*o.curve);
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

}  // namespace saturate

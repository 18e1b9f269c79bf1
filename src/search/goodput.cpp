#include "saturate/search/goodput.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::string to_string(Objective o) {
  switch (o) {
    case Objective::kMemory: return "memory";
    case Objective::kThroughput: return "throughput";
    case Objective::kGoodput: return "goodput";
  }
  return "?";
}

Objective parse_objective(const std::string& text) {
  if (text == "memory") return Objective::kMemory;
  if (text == "throughput") return Objective::kThroughput;
  if (text == "goodput") return Objective::kGoodput;
  throw UsageError("objective", fmt::format("'{}' is not an objective; use memory (the largest batch under the "
                                            "target), throughput (the knee of samples/s) or goodput (samples/s x "
                                            "statistical efficiency)",
                                            text));
}

double statistical_efficiency(std::optional<double> noise_scale, int64_t base_batch, int64_t batch) {
  if (!noise_scale) return 1.0;
  const double phi = *noise_scale;
  return (phi + static_cast<double>(base_batch)) / (phi + static_cast<double>(batch));
}

double adascale_gain(std::optional<double> noise_scale, int64_t base_batch, int64_t batch) {
  return static_cast<double>(batch) / static_cast<double>(base_batch) *
         statistical_efficiency(noise_scale, base_batch, batch);
}

std::string to_string(LrRule r) { return r == LrRule::kAdaScale ? "adascale" : "adascale-sqrt"; }

double lr_gain(LrRule rule, std::optional<double> noise_scale, int64_t base_batch, int64_t batch) {
  const double g = adascale_gain(noise_scale, base_batch, batch);
  return rule == LrRule::kAdaScale ? g : std::sqrt(g);
}

GoodputChoice choose_goodput_batch(const ThroughputCurve& curve, std::optional<double> noise_scale, int64_t base_batch,
                                   LrRule rule) {
  if (base_batch <= 0)
    throw UsageError("base_batch", fmt::format("{} is not a positive batch; give the batch the learning rate was "
                                               "tuned for",
                                               base_batch));
  GoodputChoice c;
  c.noise_scale = noise_scale;
  c.base_batch = base_batch;
  const GoodputPoint* best = nullptr;
  int64_t largest_ok = 0;
  for (const auto& p : curve.points)
    if (p.ok) largest_ok = std::max(largest_ok, p.batch);
  for (const auto& p : curve.points) {
    if (!p.ok || p.batch < std::min(base_batch, largest_ok)) continue;
    GoodputPoint g;
    g.batch = p.batch;
    g.samples_per_s = p.samples_per_s;
    g.efficiency = statistical_efficiency(noise_scale, base_batch, p.batch);
    g.goodput = g.samples_per_s * g.efficiency;
    c.points.push_back(g);
  }
  for (const auto& g : c.points)
    if (!best || g.goodput > best->goodput) best = &g;
  if (!best) {
    c.reason = "no batch of the throughput curve ran";
    return c;
  }
  c.batch = best->batch;
  c.efficiency = best->efficiency;
  c.lr_rule = rule;
  c.lr_gain = lr_gain(rule, noise_scale, base_batch, c.batch);
  const std::string phi = noise_scale ? fmt::format("gradient noise scale {:.0f} samples", *noise_scale)
                                      : std::string("gradient noise scale not measurable (the gradient is all noise)");
  c.reason = fmt::format("batch {}: {:.0f} samples/s x efficiency {:.2f} = goodput {:.0f} (best of {} batches from the base batch up; {}, "
                         "learning rate tuned at batch {}; fastest: batch {} at {:.0f} samples/s)",
                         c.batch, best->samples_per_s, best->efficiency, best->goodput, c.points.size(), phi, base_batch,
                         curve.best_batch, curve.best_samples_per_s);
  return c;
}

}  // namespace saturate

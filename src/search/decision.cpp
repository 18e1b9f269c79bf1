#include "saturate/search/decision.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace saturate {
namespace {

std::string memory_reason(const SearchResult& r) {
  const double pct =
      r.budget_bytes > 0 ? 100.0 * static_cast<double>(r.target_bytes) / static_cast<double>(r.budget_bytes) : 0;
  std::string s = fmt::format("the largest batch whose measured peak stays within {:.0f} % of the budget", pct);
  if (r.recommended_exact) s += fmt::format(" (exact: {} went over)", r.recommended_batch + 1);
  return s;
}

/// The fastest memory probe's batch, when it is below the memory-safe one: each probe times one
/// step, so it is a hint, not a curve.
void add_fastest_probe(const SearchResult& r, int64_t safe, BatchDecision& d) {
  if (r.throughput_batch <= 0 || r.throughput_batch >= safe) return;
  d.alternatives.push_back({"fastest_probe", r.throughput_batch,
                            "the smallest memory probe within 3 % of the fastest probe's samples/s (one timed step "
                            "each: time the curve with `objective` throughput before relying on it)"});
}

}  // namespace

BatchDecision decide_batch(const SearchResult& r, const ObjectiveOutcome* objective) {
  BatchDecision d;
  const int64_t safe = r.recommended_batch > 0 ? r.recommended_batch : 0;
  if (objective) {
    d.requested = objective->requested;
    d.fallback = objective->fallback;
  }
  if (safe == 0) {
    d.reason = !r.error.empty()      ? "the search failed: " + r.error
               : r.max_batch == 0    ? std::string("batch 1 does not fit the budget")
                                     : fmt::format("no batch keeps its measured peak within the target (batches up to "
                                                   "{} fit the whole budget, with no margin)",
                                                   r.max_batch);
    return d;
  }
  const bool objective_chose = objective && objective->objective != Objective::kMemory && objective->batch > 0;
  if (!objective_chose) {
    d.batch = safe;
    d.objective = Objective::kMemory;
    d.reason = fmt::format("batch {}: {}", safe, memory_reason(r));
    if (objective && objective->requested != Objective::kMemory && d.fallback.empty())
      d.fallback = fmt::format("{} chose no batch (no point of its curve ran)", to_string(objective->requested));
    if (!d.fallback.empty()) d.reason += "; " + d.fallback;
    add_fastest_probe(r, safe, d);
    return d;
  }
  d.objective = objective->objective;
  d.batch = std::min(objective->batch, safe);
  d.reason = objective->reason;
  if (objective->batch > safe)
    d.reason += fmt::format("; capped at the memory-safe batch {} ({} is above the target)", safe, objective->batch);
  d.alternatives.push_back({"memory", safe, memory_reason(r)});
  if (objective->goodput && objective->curve && objective->curve->knee_batch > 0)
    d.alternatives.push_back(
        {"throughput", std::min(objective->curve->knee_batch, safe),
         fmt::format("the smallest timed batch within {:.0f} % of the best samples/s (the curve's knee)",
                     100 * objective->curve->knee_fraction)});
  return d;
}

nlohmann::json to_json(const BatchDecision& d) {
  nlohmann::json alternatives = nlohmann::json::array();
  for (const BatchAlternative& a : d.alternatives)
    alternatives.push_back({{"name", a.name}, {"batch", a.batch}, {"reason", a.reason}});
  nlohmann::json j = {{"batch", d.batch},
                      {"objective", to_string(d.objective)},
                      {"requested", to_string(d.requested)},
                      {"reason", d.reason},
                      {"alternatives", alternatives}};
  if (!d.fallback.empty()) j["fallback"] = d.fallback;
  return j;
}

std::string decision_line(const BatchDecision& d) {
  if (d.batch <= 0) return "no batch to train at: " + d.reason;
  std::string s = fmt::format("train at batch {} (objective {}", d.batch, to_string(d.objective));
  if (d.requested != d.objective) s += fmt::format(", asked for {}", to_string(d.requested));
  s += "): " + d.reason;
  return s;
}

}  // namespace saturate

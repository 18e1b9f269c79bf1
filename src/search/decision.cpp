#include "saturate/search/decision.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/search/goodput.h"

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

namespace {

/// j[key] unless absent or null; UsageError naming path.key when it is not of the `kind` asked.
const nlohmann::json* saved(const nlohmann::json& j, const char* key, const std::string& path, bool (*is)(const nlohmann::json&),
                            const char* kind) {
  if (!j.contains(key) || j[key].is_null()) return nullptr;
  const nlohmann::json& v = j[key];
  if (!is(v))
    throw UsageError(fmt::format("{}.{}: expected {}, got {} {}", path, key, kind, v.type_name(), v.dump().substr(0, 40)));
  return &v;
}

bool is_count(const nlohmann::json& v) { return v.is_number_integer(); }
bool is_text(const nlohmann::json& v) { return v.is_string(); }
bool is_list(const nlohmann::json& v) { return v.is_array(); }

int64_t saved_count(const nlohmann::json& j, const char* key, const std::string& path) {
  const nlohmann::json* v = saved(j, key, path, is_count, "a whole number");
  return v ? v->get<int64_t>() : 0;
}

std::string saved_text(const nlohmann::json& j, const char* key, const std::string& path) {
  const nlohmann::json* v = saved(j, key, path, is_text, "a string");
  return v ? v->get<std::string>() : std::string();
}

Objective saved_objective(const nlohmann::json& j, const char* key, const std::string& path) {
  const std::string name = saved_text(j, key, path);
  if (name.empty()) return Objective::kMemory;
  try {
    return parse_objective(name);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}.{}: {}", path, key, e.what()));
  }
}

}  // namespace

BatchDecision decision_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw UsageError(fmt::format("{}: expected an object, got {}", path, j.type_name()));
  BatchDecision d;
  d.batch = saved_count(j, "batch", path);
  d.objective = saved_objective(j, "objective", path);
  d.requested = saved_objective(j, "requested", path);
  d.reason = saved_text(j, "reason", path);
  d.fallback = saved_text(j, "fallback", path);
  if (const nlohmann::json* list = saved(j, "alternatives", path, is_list, "an array")) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = fmt::format("{}.alternatives[{}]", path, i);
      const nlohmann::json& a = (*list)[i];
      if (!a.is_object()) throw UsageError(fmt::format("{}: expected an object, got {}", at, a.type_name()));
      d.alternatives.push_back({saved_text(a, "name", at), saved_count(a, "batch", at), saved_text(a, "reason", at)});
    }
  }
  return d;
}

std::string decision_line(const BatchDecision& d) {
  if (d.batch <= 0) return "no batch to train at: " + d.reason;
  std::string s = fmt::format("train at batch {} (objective {}", d.batch, to_string(d.objective));
  if (d.requested != d.objective) s += fmt::format(", asked for {}", to_string(d.requested));
  s += "): " + d.reason;
  return s;
}

}  // namespace saturate

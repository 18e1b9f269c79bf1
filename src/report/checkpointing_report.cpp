#include "report/checkpointing_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "saturate/core/units.h"

namespace saturate {
namespace {

std::string law_text(const MemoryLaw& m) {
  if (!m.valid) return "-";
  return fmt::format("{} + {}/sample", format_bytes(static_cast<int64_t>(m.fixed_bytes)),
                     format_bytes(static_cast<int64_t>(m.per_sample_bytes)));
}

std::vector<const Trial*> ok_trials_by_batch(const SearchResult& r) {
  std::vector<const Trial*> out;
  for (const Trial& t : r.trials)
    if (t.ok()) out.push_back(&t);
  std::stable_sort(out.begin(), out.end(), [](const Trial* a, const Trial* b) { return a->batch < b->batch; });
  return out;
}

}  // namespace

nlohmann::json checkpointing_curve_json(const SearchResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const Trial& t : r.trials)
    trials.push_back({{"batch", t.batch},
                      {"status", to_string(t.status)},
                      {"peak_allocated_bytes", t.peak_allocated_bytes},
                      {"peak_reserved_bytes", t.peak_reserved_bytes},
                      {"step_time_ms", t.step_time_ms},
                      {"samples_per_s", t.samples_per_s}});
  const BestBatch best = best_usable_batch(r);
  const double rec = measured_samples_per_s(r, r.recommended_batch);
  nlohmann::json j = {{"trials", trials},
                      {"memory_model",
                       {{"fixed_bytes", static_cast<int64_t>(r.memory_model.fixed_bytes)},
                        {"per_sample_bytes", static_cast<int64_t>(r.memory_model.per_sample_bytes)},
                        {"valid", r.memory_model.valid}}},
                      {"max_batch", r.max_batch},
                      {"max_batch_exact", r.max_batch_exact},
                      {"recommended_batch", r.recommended_batch},
                      {"recommended_samples_per_s", rec > 0 ? nlohmann::json(rec) : nlohmann::json(nullptr)},
                      {"throughput_batch", r.throughput_batch},
                      {"best", {{"batch", best.batch}, {"samples_per_s", best.samples_per_s}}},
                      {"trial_steps", r.trial_steps},
                      {"search_seconds", r.search_seconds}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

nlohmann::json checkpointing_auto_json(const CheckpointingChoice& c, const SearchResult& without,
                                       const SearchResult& with, const std::string& with_policy) {
  return {{"policy", "auto"},
          {"choice", c.choice},
          {"reason", c.reason},
          {"curves", {{"none", checkpointing_curve_json(without)}, {with_policy, checkpointing_curve_json(with)}}}};
}

std::string checkpointing_auto_text(const CheckpointingChoice& c, const SearchResult& without,
                                    const SearchResult& with, const std::string& with_policy) {
  const auto rec = [](const SearchResult& r) {
    const double s = measured_samples_per_s(r, r.recommended_batch);
    return s > 0 ? fmt::format("{:.1f}", s) : std::string("-");
  };
  const auto best = [](const BestBatch& b) {
    return b.batch ? fmt::format("{:.1f} at {}", b.samples_per_s, b.batch) : std::string("-");
  };
  std::string s = fmt::format("\ncheckpointing      auto: chose {}\n  because          {}\n", c.choice, c.reason);
  const auto row = [&](const std::string& name, const std::string& a, const std::string& b) {
    s += fmt::format("  {:<22} {:>26}  {:>26}\n", name, a, b);
  };
  row("", "none", with_policy);
  row("max_batch", std::to_string(without.max_batch), std::to_string(with.max_batch));
  row("recommended_batch", std::to_string(without.recommended_batch), std::to_string(with.recommended_batch));
  row("  its samples/s", rec(without), rec(with));
  row("best samples/s", best(c.best_without), best(c.best_with));
  row("memory model", law_text(without.memory_model), law_text(with.memory_model));
  row("trials (steps)", fmt::format("{} ({})", without.trials.size(), without.trial_steps),
      fmt::format("{} ({})", with.trials.size(), with.trial_steps));
  s += "  curves (fitting trials: batch  peak reserved  samples/s)\n";
  const auto a = ok_trials_by_batch(without);
  const auto b = ok_trials_by_batch(with);
  const auto cell = [](const std::vector<const Trial*>& v, size_t i) {
    if (i >= v.size()) return std::string();
    return fmt::format("{:>7}  {:>10}  {:>9.1f}", v[i]->batch, format_bytes(v[i]->peak_reserved_bytes),
                       v[i]->samples_per_s);
  };
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    s += fmt::format("  {:<22} {:>26}  {:>26}\n", "", cell(a, i), cell(b, i));
  return s;
}

}  // namespace saturate

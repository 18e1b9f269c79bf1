#include "report/search_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/units.h"

namespace saturate {

std::string objective_text(Objective objective, const std::string& reason,
                           const std::optional<NoiseScaleMeasurement>& noise, const std::string& noise_data,
                           const std::optional<GoodputChoice>& goodput) {
  if (objective == Objective::kMemory) return "";
  std::string s = fmt::format("objective          {}: {}\n", to_string(objective), reason);
  if (noise)
    s += fmt::format("noise scale        {} ({} steps of batch {} on {})\n",
                     noise->noise_scale ? fmt::format("{:.0f} samples", *noise->noise_scale)
                                        : std::string("not measurable: the gradient is all noise"),
                     noise->steps, noise->batch, noise_data);
  if (goodput)
    s += fmt::format("learning rate      x{:.2f} at batch {} ({} from base batch {})\n", goodput->lr_gain,
                     goodput->batch, to_string(goodput->lr_rule), goodput->base_batch);
  return s;
}

std::string rank_text(const std::vector<RankMax>& ranks, const std::string& backend, int64_t used) {
  if (ranks.empty()) return "";
  std::string s = fmt::format("ranks              {} ({}):", ranks.size(), backend);
  for (const RankMax& r : ranks)
    s += fmt::format(" rank {} max {}{} of {};", r.rank, r.exact ? "" : ">=", r.max_batch,
                     format_bytes(r.budget_bytes));
  s += fmt::format(" every rank uses {}\n", used);
  return s;
}

std::string fast_paths_text(const FastPathChoice& c, int64_t batch) {
  std::string tried;
  for (const auto& t : c.tried)
    tried += fmt::format("{}{} {}{}", tried.empty() ? "" : ", ", t.name,
                         t.with_ms > 0 ? fmt::format("{:+.1f} %", 100 * t.gain) : "failed", t.kept ? " (kept)" : "");
  const bool any = std::any_of(c.tried.begin(), c.tried.end(), [](const FastPathTrial& t) { return t.kept; });
  const std::string what =
      any ? fmt::format("{} ({:.2f} -> {:.2f} ms/step at batch {}, {:+.1f} % steps/s)", c.chosen.to_string(), c.baseline_ms,
                        c.chosen_ms, batch, 100 * (c.baseline_ms / c.chosen_ms - 1))
          : fmt::format("{}: none measured faster at batch {} ({:.2f} ms/step)", c.chosen.to_string(), batch, c.baseline_ms);
  return fmt::format("fast paths         {}; tried: {}\n", what, tried.empty() ? "none" : tried);
}

}  // namespace saturate

#include "saturate/search/checkpointing_choice.h"

#include <fmt/format.h>

namespace saturate {

BestBatch best_usable_batch(const SearchResult& r) {
  BestBatch best;
  for (const Trial& t : r.trials) {
    if (!t.ok() || t.samples_per_s <= 0) continue;
    if (r.recommended_batch > 0 && t.batch > r.recommended_batch) continue;
    if (t.samples_per_s > best.samples_per_s) best = {t.batch, t.samples_per_s};
  }
  return best;
}

double measured_samples_per_s(const SearchResult& r, int64_t batch) {
  double best = 0;
  for (const Trial& t : r.trials)
    if (t.ok() && t.batch == batch && t.samples_per_s > best) best = t.samples_per_s;
  return best;
}

CheckpointingChoice choose_checkpointing(const SearchResult& without, const SearchResult& with,
                                         const std::string& with_policy, int64_t required_batch, double tolerance) {
  CheckpointingChoice c;
  c.best_without = best_usable_batch(without);
  c.best_with = best_usable_batch(with);
  const std::string figures = fmt::format(
      "max batch {} without, {} with {}; best samples/s {:.1f} at batch {} without, {:.1f} at batch {} with",
      without.max_batch, with.max_batch, with_policy, c.best_without.samples_per_s, c.best_without.batch,
      c.best_with.samples_per_s, c.best_with.batch);
  if (!with.error.empty() || with.max_batch == 0) {
    c.choice = "none";
    c.reason = with.error.empty() ? fmt::format("{} does not make batch 1 fit either ({})", with_policy, figures)
                                  : fmt::format("the search with {} failed: {}", with_policy, with.error);
    return c;
  }
  if (without.max_batch == 0) {
    c.choice = with_policy;
    c.reason = fmt::format("batch 1 only fits with {} ({})", with_policy, figures);
    return c;
  }
  if (required_batch > 0) {
    const bool fits_without = required_batch <= without.max_batch;
    const bool fits_with = required_batch <= with.max_batch;
    if (!fits_without && fits_with) {
      c.choice = with_policy;
      c.reason = fmt::format("the required batch {} only fits with {} ({})", required_batch, with_policy, figures);
      return c;
    }
    if (fits_without) {
      c.choice = "none";
      c.reason = fmt::format("the required batch {} fits without checkpointing, which spares the recomputation ({})",
                             required_batch, figures);
      return c;
    }
    // fits neither: fall through to throughput; the reason says so.
  }
  const std::string required_note =
      required_batch > 0 && required_batch > with.max_batch
          ? fmt::format("the required batch {} fits neither way (use accumulation); ", required_batch)
          : "";
  // a win must come from a batch the search could not use without checkpointing (a batch that
  // fits without it runs faster without the recomputation) and beat the best without by more
  // than the measuring noise.
  const int64_t usable_without = without.recommended_batch > 0 ? without.recommended_batch : without.max_batch;
  const bool larger = c.best_with.batch > usable_without;
  const bool faster = c.best_with.samples_per_s > c.best_without.samples_per_s * (1 + tolerance);
  if (larger && faster) {
    c.choice = with_policy;
    c.reason = fmt::format("{}{} lets batch {} fit, {:.1f} samples/s against at most {:.1f} without ({})",
                           required_note, with_policy, c.best_with.batch, c.best_with.samples_per_s,
                           c.best_without.samples_per_s, figures);
    return c;
  }
  c.choice = "none";
  c.reason = larger ? fmt::format("{}{} does not pay: {}; its larger batches are not more than {:.0f} % faster "
                                  "than the best without it",
                                  required_note, with_policy, figures, 100 * tolerance)
                    : fmt::format("{}{} does not pay: {}; its fastest batch also fits without it, where nothing is "
                                  "recomputed",
                                  required_note, with_policy, figures);
  if (with.max_batch <= without.max_batch)
    c.reason = fmt::format("{}{} does not raise the max batch ({})", required_note, with_policy, figures);
  return c;
}

}  // namespace saturate

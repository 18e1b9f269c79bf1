#include "saturate/session/search_session.h"

#include <cmath>

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/memory/allocator_model.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/memory/plan.h"
#include "saturate/report/data_text.h"
#include "saturate/report/memory_text.h"
#include "saturate/session/data_session.h"
#include "saturate/data/text_data.h"

namespace saturate {

void PlanForOptions::check() const {
  if (plan_for.empty()) {
    if (plan_only)
      throw UsageError("plan_only", "needs `plan_for` (a card such as h100-80gb, or a size such as 24GiB)");
    return;
  }
  (void)parse_plan_target(plan_for);
  if (!plan_allocator.empty()) (void)parse_allocator_kind(plan_allocator);
  (void)parse_plan_batches(plan_batches);
}

std::optional<PlanResult> run_plan_for(const PlanForOptions& f, WorkloadSession& s, double target_fraction) {
  f.check();
  if (f.plan_for.empty()) return std::nullopt;
  PlanRunOptions o;
  o.target = parse_plan_target(f.plan_for);
  o.allocator = f.plan_allocator.empty() ? AllocatorKind::kCudaCaching : parse_allocator_kind(f.plan_allocator);
  o.target_fraction = target_fraction;
  std::tie(o.batch_a, o.batch_b) = parse_plan_batches(f.plan_batches);
  return plan_from_run(*s.workload, *s.meter, o);
}

namespace {

/// Batch 1 did not fit: what it needs without the budget, so that the failure can say it.
std::string batch_one_need(WorkloadSession& s, const TrainingFootprint& footprint) {
  const int64_t budget = s.meter->budget_bytes();
  s.meter->set_budget_bytes(s.meter->capacity_bytes());
  Probe probe(*s.workload, *s.meter);
  probe.set_footprint(footprint);
  const Trial t = probe.run(1, {1, 1, 0});
  s.meter->set_budget_bytes(budget);
  if (!t.ok()) return fmt::format("more than the device's {}", format_bytes(s.meter->capacity_bytes()));
  return format_bytes(t.peak_reserved_bytes);
}

/// Why a search has no answer: an error, batch 1 too large, no batch within the target; "".
std::string search_failure(const SearchResult& result, WorkloadSession& session, const TrainingFootprint& footprint,
                           double target) {
  if (!result.error.empty()) return result.error;
  if (result.max_batch == 0)
    return fmt::format("batch 1 does not fit in `memory_budget` {}: {} needs {} at batch 1; raise the budget, or use "
                       "a smaller model or input",
                       format_bytes(session.context.budget_bytes), session.context.model_name,
                       batch_one_need(session, footprint));
  if (result.recommended_batch == 0) {  // batches fit, none within the target
    // The fraction the smallest fitting batch needs is what to raise the target to (not a fixed example,
    // which may be the value already given).
    int64_t smallest_peak = 0;
    int64_t smallest_batch = 0;
    for (const Trial& t : result.trials)
      if (t.ok() && (smallest_batch == 0 || t.batch < smallest_batch)) {
        smallest_batch = t.batch;
        smallest_peak = t.peak_reserved_bytes;
      }
    const double budget = static_cast<double>(session.context.budget_bytes);
    const double needed = budget > 0 ? std::ceil(100.0 * static_cast<double>(smallest_peak) / budget) / 100.0 : 1.0;
    const std::string raise =
        smallest_batch > 0 && needed < 1.0
            ? fmt::format("raise `target_fraction` to at least {:.2f} (batch {} peaked at {}), or `memory_budget`",
                          needed, smallest_batch, format_bytes(smallest_peak))
            : std::string("raise `memory_budget`");
    return fmt::format("no batch keeps its measured peak within `target_fraction` {:g} of the budget ({}); batches up "
                       "to {} fit the whole budget: {}",
                       target, format_bytes(static_cast<int64_t>(target * budget)), result.max_batch, raise);
  }
  return "";
}

}  // namespace

std::string trial_data_name(const OpenedData& data) {
  if (!data.text.empty()) return data.text + " (its longest documents: the worst case)";
  if (!data.tokens.empty()) return data.tokens + " (windows of seq_len tokens: the trials' token batches have their shape)";
  return data.dataset ? data.dataset->name() : "synthetic batches (random labels, not your data)";
}

namespace {

// TextWorstCase (search_session.h): one typed result, two printers (to_json, worst_case_text):
// no printer reads the other's keys.
TextWorstCase text_worst_case(const WorstCaseOrder& w, const SearchResult& r) {
  TextWorstCase c;
  c.documents = w.items();
  c.longest_tokens = w.largest_size() - 1;
  c.median_tokens = w.median_size() - 1;
  c.worst_documents = w.worst_items(std::max<int64_t>(1, std::min<int64_t>(r.max_batch, 8)));
  c.max_tokens = r.max_batch * c.longest_tokens;
  c.recommended_tokens = r.recommended_batch * c.longest_tokens;
  return c;
}

nlohmann::json worst_case_json(const TextWorstCase& c) {
  nlohmann::json j = {{"documents", c.documents},
                      {"longest_tokens", c.longest_tokens},
                      {"median_tokens", c.median_tokens},
                      {"worst_documents", c.worst_documents},
                      {"max_tokens", c.max_tokens},
                      {"recommended_tokens", c.recommended_tokens}};
  if (c.median) {
    j["median_max_batch"] = c.median->max_batch;
    j["median_max_batch_exact"] = c.median->max_batch_exact;
    j["median_recommended_batch"] = c.median->recommended_batch;
    j["median_trials"] = c.median->trials;
  }
  return j;
}

std::string worst_case_text(const TextWorstCase& c) {
  std::string text = fmt::format(
      "worst case         the longest of {} documents: {} tokens (median {}); every batch of the "
      "epoch fits where these do\ntoken budget       max_tokens {} (recommended {}) for `max_tokens`\n",
      c.documents, c.longest_tokens, c.median_tokens, c.max_tokens, c.recommended_tokens);
  if (c.median)
    text += fmt::format("median batches     max {}, recommended {} ({} trials): documents of the median length; "
                        "unsafe once the longest come\n",
                        c.median->max_batch, c.median->recommended_batch, c.median->trials);
  return text;
}

/// The same search on batches of median-length documents: what a finder that never meets the
/// tail would answer, beside the worst case (its own probe: the first search's records stay).
std::optional<TextWorstCase::Median> median_answer(WorkloadSession& session, const TextDocs& docs,
                                                   const SearchOptions& options, DistGroup* dist) {
  Probe probe(*session.workload, *session.meter);
  probe.set_empty_cache_before_trials(true);
  WorstCaseTextSource median(docs, session.device, /*median=*/true);
  probe.set_batch_source(&median);
  SearchOptions so = options;
  so.on_trial = nullptr;
  const SearchResult m = search_across_ranks(probe, so, dist, /*exact_ranks=*/false).result;
  if (!m.error.empty()) return std::nullopt;
  return TextWorstCase::Median{m.max_batch, m.max_batch_exact, m.recommended_batch,
                               static_cast<int64_t>(m.trials.size())};
}

}  // namespace

SearchSessionResult run_search_session(WorkloadSession& session, const OpenedData& opened,
                                       const SearchSessionOptions& options, DistGroup* dist,
                                       const SearchSessionEvents& events) {
  options.plan.check();
  Probe probe(*session.workload, *session.meter);
  WorkloadSearch search(probe, *session.meter, options.search, session.context.world_size);  // GEMM rate, FLOPs
  MemoryObserver memory(*session.workload);  // memory_breakdown per trial
  probe.add_observer(&memory);
  probe.set_empty_cache_before_trials(true);  // trials compare reserved peaks: each starts from an empty cache
  // the loader feeds every trial; `workers` auto is tuned once, at batch 32 (or the cap)
  const int64_t cap = options.search.search.max_batch;
  auto data = attach_data(opened, options.data, probe, session, cap > 0 ? std::min<int64_t>(32, cap) : 32, events.data);
  // text: every trial at its size's costliest batch (the longest documents), not the first ones
  std::optional<TextCorpus> text;
  std::unique_ptr<WorstCaseTextSource> worst;
  if (!opened.text.empty()) {
    check_text_vocab(opened.text, session.workload->built().classes);
    text = open_text_data(options.data, session.workload->built().spec.seq_len);
    worst = std::make_unique<WorstCaseTextSource>(text->train, session.device);
    probe.set_batch_source(worst.get());
  }
  std::unique_ptr<MonitorObserver> monitor;
  if (options.monitor) {
    MonitorOptions mo = *options.monitor;
    const Precision precision = options.search.footprint.precision;
    mo.mixed_precision = precision == Precision::kBf16 || precision == Precision::kFp16;
    monitor = std::make_unique<MonitorObserver>(mo);
    if (!monitor->nvml_note().empty() && events.on_warning)
      events.on_warning(monitor->nvml_note() + "; utilization falls back to /proc");
    probe.add_observer(monitor.get());
  }
  DataFeed* feed = data ? data->feed.get() : nullptr;
  const std::string source = trial_data_name(opened);
  Workload& w = *session.workload;
  SearchSessionResult r;
  r.found = search.run(
      dist, [&](int64_t b) { return feed ? feed->next(b) : w.synthetic_batch(b); }, source, events.progress);
  const SearchResult& result = r.found.search();
  if (dist) session.context.budget_bytes = result.budget_bytes;  // the smallest rank's
  if (monitor) monitor->finish();
  if (data) data->rethrow_error();  // a bad sample is a DataError naming the file
  r.plan = run_plan_for(options.plan, session, options.search.search.target_fraction);
  r.notes = r.found.notes();
  if (r.plan) r.notes += plan_text(*r.plan);
  if (worst) {
    TextWorstCase worst_case = text_worst_case(worst->worst(), result);
    if (result.error.empty() && result.max_batch > 0)
      worst_case.median = median_answer(session, text->train, options.search.search, dist);
    r.notes += worst_case_text(worst_case);
    r.worst_case = worst_case;
  }
  if (data) {
    r.data = data->source();
    r.notes += data_search_text(*r.data, result);
  }
  r.failure = search_failure(result, session, probe.footprint(), options.search.search.target_fraction);
  return r;
}

nlohmann::json SearchSessionResult::to_json(const RunContext& context) const {
  nlohmann::json j = found.to_json(context);
  if (plan) j["plan"] = plan_json(*plan);
  add_memory_breakdown_json(j, found.search());
  if (worst_case) j["worst_case"] = worst_case_json(*worst_case);
  return j;
}

}  // namespace saturate

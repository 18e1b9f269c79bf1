#include "saturate/train/auto_batch.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/probe/probe.h"

namespace saturate {

AutoBatch choose_micro_batch(Workload& workload, MemoryMeter& meter, const AutoBatchOptions& o) {
  check_batch_request(o.request);
  TrainingFootprint footprint = o.footprint;
  footprint.global_batch.reset();
  footprint.accumulation = 1;
  if (global_batch_of(o.request))
    footprint.global_batch = rank_share(o.request);
  else
    footprint.accumulation = o.request.accumulation.value_or(1);  // global = micro x accumulation
  Probe probe(workload, meter);
  probe.set_footprint(footprint);
  for (ProbeObserver* obs : o.observers) probe.add_observer(obs);
  SearchOptions so = o.search;
  const int64_t limit = micro_batch_limit(o.request).value_or(0);
  if (limit > 0) so.max_batch = so.max_batch > 0 ? std::min(so.max_batch, limit) : limit;
  AutoBatch a;
  a.search = o.run_search ? o.run_search(probe, so) : search_batch_size(probe, so);
  const SearchResult& r = a.search;
  if (!r.error.empty()) throw RuntimeFailure("the micro-batch search failed: " + r.error);
  const int64_t resident_at_one = probe.workload_step().resident_data_bytes(1);
  if (r.max_batch == 0)
    throw RuntimeFailure(fmt::format(
        "not even micro-batch 1 trains within {}: the loader's {} prefetched {} and the global batch of {} in "
        "use take {} of it; lower the prefetch depth or worker count, the global batch, or raise the budget",
        format_bytes(r.budget_bytes), footprint.prefetched_batches,
        footprint.prefetches_micro_batches ? "micro-batch(es)" : "global batch(es)", footprint.global_batch.value_or(0),
        format_bytes(resident_at_one)));
  // the target fraction leaves headroom when asked (< 1); at 1 the exact maximum is taken
  a.micro_batch = so.target_fraction >= 1.0 || r.recommended_batch == 0 ? r.max_batch : r.recommended_batch;
  a.plan = plan_batches(o.request, a.micro_batch);
  a.resident_data_bytes = probe.workload_step().resident_data_bytes(a.plan.micro_batch);
  a.reason = fmt::format("{} micro-batch {} ({}{}), measured with {} held for the loader's batches", 
                         so.target_fraction >= 1.0 ? "the largest" : "the recommended", a.micro_batch,
                         r.max_batch_exact ? fmt::format("{} does not fit", r.max_batch + 1)
                                           : (r.capped ? (limit > 0 && so.max_batch == limit
                                                                    ? "capped by the global batch"
                                                                    : fmt::format("capped by the data: {} samples a rank",
                                                                                  so.max_batch))
                                                       : "max not bracketed"),
                         so.target_fraction >= 1.0 ? "" : fmt::format(", max {}", r.max_batch),
                         format_bytes(a.resident_data_bytes));
  return a;
}

AutoEvalBatch choose_eval_batch(Workload& workload, MemoryMeter& meter, const AutoEvalBatchOptions& o) {
  if (o.micro_batch < 1)
    throw UsageError("micro_batch", fmt::format("{}: the evaluation is sized beside a training micro-batch of 1 or "
                                                "more", o.micro_batch));
  TrainingFootprint footprint = o.footprint;
  footprint.eval_search_micro_batch = o.micro_batch;
  footprint.global_batch = std::max(o.rank_batch, o.micro_batch);
  footprint.accumulation = 1;
  footprint.eval_batch = footprint.eval_batch_per_micro = 0;
  Probe probe(workload, meter);
  probe.set_footprint(footprint);
  for (ProbeObserver* obs : o.observers) probe.add_observer(obs);
  SearchOptions so = o.search;
  if (o.max_eval_batch > 0) so.max_batch = so.max_batch > 0 ? std::min(so.max_batch, o.max_eval_batch) : o.max_eval_batch;
  AutoEvalBatch a;
  a.search = o.run_search ? o.run_search(probe, so) : search_batch_size(probe, so);
  const SearchResult& r = a.search;
  if (!r.error.empty()) throw RuntimeFailure("the evaluation batch search failed: " + r.error);
  if (r.max_batch == 0)
    throw RuntimeFailure(fmt::format("not even an evaluation batch of 1 fits within {} beside training's state at "
                                     "micro-batch {}; give a smaller `micro_batch` or more memory",
                                     format_bytes(r.budget_bytes), o.micro_batch));
  a.eval_batch = so.target_fraction >= 1.0 || r.recommended_batch == 0 ? r.max_batch : r.recommended_batch;
  a.reason = fmt::format("{} evaluation batch {} ({}{}), measured beside training's state at micro-batch {}",
                         so.target_fraction >= 1.0 ? "the largest" : "the recommended", a.eval_batch,
                         r.max_batch_exact ? fmt::format("{} does not fit", r.max_batch + 1)
                                           : (r.capped ? "all of the evaluation data" : "max not bracketed"),
                         so.target_fraction >= 1.0 ? "" : fmt::format(", max {}", r.max_batch), o.micro_batch);
  return a;
}

}  // namespace saturate

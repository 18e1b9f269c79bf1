#include "saturate/session/user_search.h"

#include <nlohmann/json.hpp>
#include "saturate/step/fast_paths.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/report/printer.h"
#include "saturate/report/report.h"
#include "report/search_text.h"
#include "saturate/session/workload_search.h"

#include <sstream>

namespace saturate {

void UserSearchOptions::check() const {
  search.check();
  objective.check();
  if (budget_bytes < 0)
    throw UsageError("budget_bytes", fmt::format("{} is negative; give the bytes the search may use (0: the device's "
                                                 "budget as it is)",
                                                 budget_bytes));
}

BatchDecision UserSearchResult::decision() const {
  return decide_batch(search, objective.requested != Objective::kMemory ? &objective : nullptr);
}

int64_t UserSearchResult::batch() const { return decision().batch; }

ComputeSummary UserSearchResult::compute() const {
  return compute_summary(search, peak, std::nullopt, mfu_note, trials_others_busy_cpus);
}

nlohmann::json UserSearchResult::to_json(const RunContext& context) const {
  nlohmann::json j = search_json(context, search);
  j["compute"] = saturate::to_json(compute());
  if (objective.requested != Objective::kMemory) j["objective"] = saturate::to_json(objective);
  j["decision"] = saturate::to_json(decision());
  if (world_size > 1) add_rank_json(j, world_size, ranks);
  // a user's step may keep tensors between calls (the built-in steps keep none; their loader's
  // prefetch grows between a trial's first steps and is bounded)
  if (const MemoryGrowth g = memory_growth(search); g.significant)
    j["memory_growth"] = {{"retained_bytes", g.retained_bytes}, {"trials_grew", g.trials_grew},
                          {"at_batch", g.at_batch}, {"bytes_per_step", g.bytes_per_step}, {"warning", g.warning()}};
  return j;
}

std::string UserSearchResult::to_text(const RunContext& context) const {
  const nlohmann::json j = to_json(context);
  std::string notes;
  if (objective.requested != Objective::kMemory)
    notes += objective_text(objective.objective, objective.reason, objective.noise, objective.noise_data,
                            objective.goodput);
  notes += compute_text(compute());
  if (world_size > 1) notes += rank_text(ranks, ranks_backend, search.max_batch);
  if (const std::string w = memory_growth(search).warning(); !w.empty()) notes += "warning: " + w + "\n";
  std::ostringstream out;
  const auto printer = make_printer(OutputFormat::kConsole, out);  // the table, not the live lines
  printer->begin(context);
  printer->result(SearchReport{search, j, decision(), notes, SearchEffort{}});
  printer->end();
  return out.str();
}

ScopedBudget::ScopedBudget(MemoryMeter& meter, int64_t budget_bytes)
    : meter_(meter), changed_(budget_bytes > 0), before_(cpu_memory_counters().budget_bytes) {
  if (changed_) meter_.set_budget_bytes(budget_bytes);
}

ScopedBudget::~ScopedBudget() {
  if (!changed_) return;
  if (meter_.device().is_cpu()) set_cpu_budget_bytes(before_);
  else meter_.set_budget_bytes(0);
}

UserSearchResult run_user_search(UserTrialStep& step, MemoryMeter& meter, const UserSearchOptions& options,
                                 const NoiseMeasure& noise, const std::string& noise_data,
                                 const UserSearchRanks& ranks) {
  options.check();
  const int world = ranks.comm ? ranks.comm->world_size() : 1;
  if (world > 1 && options.objective.objective == Objective::kGoodput)
    throw UsageError("objective", "goodput across ranks: the noise scale is measured in one process; search with one "
                                  "rank (the batch per GPU), or use objective throughput or memory across ranks");
  if (options.objective.objective == Objective::kGoodput && !noise)
    throw UsageError("objective", "goodput needs the step's gradients to measure the noise scale; give a way to "
                                  "measure it, or use objective memory or throughput");
  if (step.device().is_cpu() && options.budget_bytes <= 0 && cpu_memory_counters().budget_bytes <= 0)
    throw UsageError("budget_bytes", "a CPU search needs a budget, so that out-of-memory happens at that size");
  UserSearchResult out;
  // the device's GEMM rate (MFU's denominator), measured before any budget applies
  const c10::Device device = step.device();
  MemoryMeter* m = &meter;
  // FLOPs counted from the step's operators; the peak measured again if outrun, and in the precision
  // the step's products ran in (autocast is inside a user's step: bf16 against an fp32 peak bounds nothing)
  const auto measure_in = [m, device](Precision p, bool again) {
    return gemm_peak_outside_budget(*m, device, p, FastPaths{}, again);
  };
  ComputeObserver compute(measure_gemm_peak(device, Precision::kFp32),  // before any budget applies
                          [measure_in] { return measure_in(Precision::kFp32, /*again=*/true); }, measure_in);
  meter.release_cache();
  ScopedBudget budget(meter, options.budget_bytes);
  Probe probe(step, meter);
  probe.add_observer(&compute);
  std::unique_ptr<MonitorObserver> monitor;
  if (options.monitor) {
    MonitorOptions mo;
    mo.cuda = step.device().is_cuda();
    mo.device_index = step.device().has_index() ? step.device().index() : 0;
    monitor = std::make_unique<MonitorObserver>(mo);
    probe.add_observer(monitor.get());
  }
  SearchOptions so = options.search;
  so.memory_warmup_steps = std::min(so.warmup_steps, 1);  // 0: each call of the step is a whole loop
  if (world > 1) {
    DistSearchResult d = search_across_ranks(probe, so, ranks.comm, options.exact_ranks);
    out.search = std::move(d.result);
    out.ranks = std::move(d.ranks);
    out.world_size = world;
    out.ranks_backend = ranks.backend;
  } else {
    out.search = search_batch_size(probe, so);
  }
  if (monitor) monitor->finish();
  out.objective.objective = Objective::kMemory;  // until the requested objective runs
  out.objective.requested = options.objective.objective;
  out.objective.batch = out.search.recommended_batch;
  const SearchResult& r = out.search;
  if (options.objective.objective != Objective::kMemory && r.error.empty() && r.max_batch > 0) {
    const int64_t top = r.recommended_batch > 0 ? r.recommended_batch : r.max_batch;
    if (world > 1) {
      // the step communicates (a DDP or FSDP model): every rank times each batch together and sees
      // the same trial, the slowest rank's, so the curve's rounds and its knee agree on every rank
      RankSyncedRunner synced(probe, *ranks.comm);
      ObjectiveRanks every;
      every.world_size = world;
      every.step_collectives = true;
      out.objective = pick_by_objective(synced, options.objective, top, noise, noise_data, {}, every);
    } else {
      out.objective = pick_by_objective(probe, options.objective, top, noise, noise_data);
    }
  }
  out.peak = compute.peak();
  out.mfu_note = compute.mfu_note();
  out.trials_others_busy_cpus = compute.trials_others_busy_cpus();
  return out;
}

FastPathChoice try_user_fast_paths(UserTrialStep& step, MemoryMeter& meter, int64_t batch, int timed_steps) {
  if (batch < 1) throw UsageError("batch_size", fmt::format("{} is not a batch; give one that fits (e.g. the search's)", batch));
  if (timed_steps < 1) throw UsageError("timed_steps", fmt::format("{} is not a positive number of steps", timed_steps));
  Probe probe(step, meter);
  std::vector<FastPathCandidate> candidates;
  for (FastPathCandidate& c : fast_path_candidates(step.device().is_cuda(), /*conv_model=*/true, /*fp32_step=*/true,
                                                   at::get_num_threads(), /*graphable=*/false))
    if (c.name != "channels_last" && c.name != "fused_optimizer") candidates.push_back(std::move(c));
  const auto measure = [&](const FastPaths& paths) {
    const ProcessSwitches switches(paths);
    return probe.run(batch, {1, timed_steps, 0});
  };
  return choose_fast_paths(FastPaths{}, candidates, measure);
}

}  // namespace saturate

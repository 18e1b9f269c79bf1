#include "saturate/session/workload_search.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/dist/network_measure.h"
#include "saturate/dist/process_group.h"
#include "models/flops.h"
#include "report/checkpointing_report.h"
#include "saturate/report/report.h"
#include "report/search_text.h"
#include "saturate/search/decision.h"
#include "saturate/search/fixed_cost.h"
#include "saturate/session/fast_path_trials.h"
#include "session/objective_session.h"
#include "saturate/step/fast_paths.h"

namespace saturate {

void WorkloadSearchOptions::check(int world_size) const {
  search.check();
  objective.check();
  if (required_batch < 0 || (required_batch > 0 && !compare_checkpointing))
    throw UsageError(fmt::format("`required_batch` {}: give a positive batch, together with `compare_checkpointing` "
                                 "(the comparison it decides)",
                                 required_batch));
  if (objective.objective == Objective::kGoodput && world_size > 1)
    throw UsageError("objective", "goodput across ranks: search with `objective` throughput (the ranks' curve with "
                                  "the gradients' all-reduce counted), or train with `adaptive`, which chooses the "
                                  "global batch by goodput on every rank");
}

GemmPeak gemm_peak_outside_budget(MemoryMeter& meter, const c10::Device& device, Precision precision,
                                  const FastPaths& paths, bool again) {
  const int64_t budget = meter.budget_bytes();
  meter.set_budget_bytes(meter.capacity_bytes());
  GemmPeak peak;
  try {
    ProcessSwitches switches(paths);  // the threads the step runs with
    peak = measure_gemm_peak(device, precision, paths.tf32, again);
  } catch (...) {
    meter.set_budget_bytes(budget);
    throw;
  }
  meter.release_cache();
  meter.set_budget_bytes(budget);
  return peak;
}

WorkloadSearch::WorkloadSearch(Probe& probe, MemoryMeter& meter, WorkloadSearchOptions options, int world_size)
    : probe_(probe), options_(std::move(options)) {
  options_.check(world_size);
  // a target below what every step holds whatever its batch: a usage error before any trial
  Workload& w = probe_.workload();
  check_target_above_fixed_cost(meter.budget_bytes(), options_.search.target_fraction,
                                fixed_cost_of(w.parameter_bytes(),
                                              optimizer_state_copies(to_string(w.optimizer_kind()), /*momentum=*/true),
                                              to_string(w.optimizer_kind())));
  probe_.set_footprint(options_.footprint);  // a model without blocks, fp16 on CPU: usage errors before any trial
  // FLOPs of each trial's first step and MFU against the device's measured GEMM rate
  const c10::Device device = probe_.workload().device();
  const Precision precision = options_.footprint.precision;
  const FastPaths paths = options_.footprint.fast_paths;
  MemoryMeter* m = &meter;  // the session's: it outlives the search
  compute_ = std::make_unique<ComputeObserver>(
      gemm_peak_outside_budget(meter, device, precision, paths),
      [m, device, precision, paths] { return gemm_peak_outside_budget(*m, device, precision, paths, /*again=*/true); });
  probe_.add_observer(compute_.get());
  // goodput's noise scale is measured at the model's weights as given, not as the trials left them
  if (options_.objective.objective == Objective::kGoodput)
    initial_ = std::make_unique<ModelSnapshot>(probe_.workload().model(), probe_.workload().device());
}

WorkloadSearchResult WorkloadSearch::run(DistGroup* dist, const std::function<Batch(int64_t)>& next_batch,
                                         const std::string& data, const WorkloadSearchProgress& progress) {
  const WorkloadSearchOptions& o = options_;
  WorkloadSearchResult out;
  out.footprint = o.footprint;
  if (const auto analytic = analytic_flops(probe_.workload().built().spec))
    out.analytic_flops_per_sample = analytic->training_per_sample;
  SearchRunOptions ro;
  ro.search = o.search;
  ro.compare_checkpointing = o.compare_checkpointing;
  ro.required_batch = o.required_batch;
  ro.exact_ranks = o.exact_ranks;
  ro.on_pass = progress.on_pass;
  out.run = run_search(probe_, ro, dist);
  if (dist) {
    out.world_size = dist->world_size();
    out.backend = to_string(dist->backend());
  }
  out.checkpointing_policy = o.checkpointing_policy;
  out.checkpointing_compared = to_string(ro.with_policy);
  const SearchResult& result = out.search();
  // the objective: the curve up to the recommended batch, the noise scale on the data's batches
  out.requested_objective = o.objective.objective;
  if (o.objective.objective != Objective::kMemory && result.error.empty() && result.max_batch > 0) {
    const int64_t top = result.recommended_batch > 0 ? result.recommended_batch : result.max_batch;
    // several ranks: the job's curve (the slowest rank's steps, each with the gradients' all-reduce
    // as DDP would send them, predicted from the network measured now between the ranks)
    ObjectiveRanks across;
    if (dist && dist->world_size() > 1) {
      Workload& w = probe_.workload();
      out.network = measure_network(*dist, w.device(), w.parameter_bytes());
      const double mine = out.network->predicted_ddp_ms(w.parameter_bytes());
      out.allreduce_ms = dist->all_reduce_sum({mine})[0] / dist->world_size();  // every rank the same number
      across = objective_ranks(*dist, o.objective, top, out.allreduce_ms, network_summary(*out.network));
    }
    out.objective = pick_by_objective(probe_, o.objective, top, next_batch, data, progress.objective, initial_.get(),
                                      across);
  }
  out.fast_paths_batch = result.recommended_batch > 0 ? result.recommended_batch : result.max_batch;
  out.fast_paths_policy = o.fast_paths_policy;
  if (o.try_fast_paths) {
    if (dist) {
      out.fast_paths_reason = "not tried with several ranks";
    } else if (out.fast_paths_batch > 0 && result.error.empty()) {
      out.fast_paths = try_fast_paths(probe_, out.fast_paths_batch, o.search.measure_steps);
      if (progress.on_fast_paths) progress.on_fast_paths(*out.fast_paths);
    }
  } else {
    out.fast_paths_reason = o.fast_paths_not_tried;
  }
  out.peak = compute_->peak();  // measured again when a trial outran the first
  out.mfu_note = compute_->mfu_note();
  out.trials_others_busy_cpus = compute_->trials_others_busy_cpus();
  return out;
}

SearchEffort WorkloadSearchResult::effort() const {
  if (!run.without || !run.with) return {};
  return effort_of({&*run.without, &*run.with});
}

BatchDecision WorkloadSearchResult::decision() const {
  return decide_batch(search(), requested_objective != Objective::kMemory ? &objective : nullptr);
}

nlohmann::json WorkloadSearchResult::to_json(const RunContext& context) const {
  nlohmann::json j = search_json(context, search());
  if (run.choice) {
    j["checkpointing"] = checkpointing_auto_json(*run.choice, *run.without, *run.with, checkpointing_compared);
  } else {
    nlohmann::json checkpointing = {{"policy", checkpointing_policy}, {"choice", to_string(footprint.checkpointing)}};
    if (!run.not_compared.empty()) checkpointing["reason"] = run.not_compared;
    j["checkpointing"] = checkpointing;
  }
  j["precision"] = to_string(footprint.precision);
  j["compute"] = saturate::to_json(compute());
  nlohmann::json paths = fast_paths ? saturate::to_json(*fast_paths, fast_paths_batch)
                                    : nlohmann::json{{"chosen", footprint.fast_paths.to_string()}};
  paths["policy"] = fast_paths_policy;
  if (!fast_paths && !fast_paths_reason.empty()) paths["reason"] = fast_paths_reason;
  j["fast_paths"] = paths;
  if (requested_objective != Objective::kMemory) j["objective"] = saturate::to_json(objective);
  j["decision"] = saturate::to_json(decision());
  if (world_size > 1) add_rank_json(j, world_size, run.chosen.ranks);
  if (network) {
    j["network"] = saturate::to_json(*network);
    j["network"]["predicted_allreduce_ms"] = allreduce_ms;
  }
  return j;
}

ComputeSummary WorkloadSearchResult::compute() const {
  return compute_summary(search(), peak, analytic_flops_per_sample, mfu_note, trials_others_busy_cpus);
}

std::string WorkloadSearchResult::notes() const {
  std::string notes;
  if (footprint.checkpointing.enabled()) notes += "checkpointing      " + to_string(footprint.checkpointing) + "\n";
  if (footprint.precision != Precision::kFp32) notes += "precision          " + to_string(footprint.precision) + "\n";
  notes += objective_text(objective.objective, objective.reason, objective.noise, objective.noise_data,
                          objective.goodput);
  notes += compute_text(compute());
  if (fast_paths) notes += fast_paths_text(*fast_paths, fast_paths_batch);
  if (run.choice) notes += checkpointing_auto_text(*run.choice, *run.without, *run.with, checkpointing_compared);
  if (world_size > 1) notes += rank_text(run.chosen.ranks, backend, search().max_batch);
  return notes;
}

void add_memory_breakdown_json(nlohmann::json& j, const SearchResult& result) {
  for (const Trial& t : result.trials)
    if (t.batch == result.recommended_batch && t.ok() && t.findings.memory_breakdown) {
      j["memory_breakdown"] = to_json(*t.findings.memory_breakdown);
      j["memory_breakdown"]["batch"] = t.batch;
    }
}

}  // namespace saturate

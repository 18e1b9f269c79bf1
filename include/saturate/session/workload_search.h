// Implements: the search on a built-in or TorchScript workload (`saturate search`): after the
// memory search (one rank or several; with and without activation checkpointing when asked),
// FLOPs and MFU against the device's measured GEMM rate, the objective (throughput, goodput on
// the data's batches), the fast-path trials; a typed result with the search JSON and the lines
// for people. What feeds the probe (the data loader, the memory recorder, the monitor) is
// attached to it by the caller; plan and data notes are the caller's too.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/dist/network_measure.h"
#include "saturate/dist/search_run.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/report/report.h"
#include "saturate/probe/probe.h"
#include "saturate/report/printer.h"
#include "saturate/step/model_snapshot.h"
#include "saturate/report/run_context.h"
#include "saturate/search/fast_path_choice.h"
#include "saturate/search/objective.h"
#include "saturate/search/search_progress.h"

namespace saturate {
class DistGroup;  // dist/process_group.h

struct WorkloadSearchOptions {
  /// strategy, target_fraction, max_batch, start_batch, steps, confirm_runs (SearchOptions::check).
  SearchOptions search;
  /// Which batch is best among those that fit; not memory with several ranks.
  ObjectiveOptions objective;
  /// The step: precision, checkpointing (the policy searched when not compared), fast paths.
  TrainingFootprint footprint;
  /// compare_checkpointing: search without and with `with_policy` and choose (checkpointing auto).
  bool compare_checkpointing = false;
  /// required_batch >= 0, only with compare_checkpointing: the micro-batch the user needs.
  int64_t required_batch = 0;
  /// exact_ranks: several ranks, each rank's own maximum found exactly.
  bool exact_ranks = false;
  /// fast_paths: time the fast paths at the batch found (one process only).
  bool try_fast_paths = false;
  /// How the user named the two policies, for the JSON ("auto", "none", "try", ...).
  std::string checkpointing_policy = "none";
  std::string fast_paths_policy = "none";
  /// Why fast paths were not tried, when they were not ("" : none said).
  std::string fast_paths_not_tried;
  /// UsageError naming the option.
  void check(int world_size = 1) const;
};


struct WorkloadSearchResult {
  SearchRun run;  ///< run.chosen.result is the answer
  GemmPeak peak;
  std::string mfu_note;  ///< why a trial has no MFU (its rate outran the peak measured twice)
  double trials_others_busy_cpus = -1;  ///< other processes' busy CPUs over the trials (-1: not read)
  std::optional<double> analytic_flops_per_sample;
  Objective requested_objective = Objective::kMemory;
  ObjectiveOutcome objective;  ///< memory (nothing timed) unless the requested objective ran
  std::optional<FastPathChoice> fast_paths;
  int64_t fast_paths_batch = 0;
  std::string checkpointing_policy;  ///< as asked (`checkpointing`); the choice is footprint's
  std::string checkpointing_compared;  ///< with run.choice: the policy compared against none
  std::string fast_paths_policy;  ///< as asked (`fast_paths`); the chosen are footprint's
  std::string fast_paths_reason;  ///< why the fast paths were not tried ("": tried, or none said)
  int world_size = 1;
  std::string backend;  ///< several ranks: the process group's backend
  /// Several ranks with objective throughput: the network measured between them, and the
  /// gradients' all-reduce a step predicted from it (the ranks' mean) that the curve counts.
  std::optional<NetworkMeasure> network;
  double allreduce_ms = 0;
  TrainingFootprint footprint;

  const SearchResult& search() const { return run.chosen.result; }
  /// Every curve the run searched (both with checkpointing auto; curves 0 when only the answer's).
  SearchEffort effort() const;
  /// The one answer (search/decision.h): the objective's batch when it ran, else memory's.
  BatchDecision decision() const;
  /// search_json and checkpointing, precision, compute, fast_paths, objective, decision, ranks.
  nlohmann::json to_json(const RunContext& context) const;
  /// The lines after the answer: checkpointing, precision, objective, compute, fast paths, the
  /// checkpointing comparison, ranks.
  /// The step's compute at the chosen batch (the JSON's `compute` and the notes' line print it).
  ComputeSummary compute() const;
  std::string notes() const;
};

/// The device's GEMM rate with `precision` and the fast paths' switches, measured outside the
/// meter's budget (put back afterwards); `again`: measured anew (measure_gemm_peak).
GemmPeak gemm_peak_outside_budget(MemoryMeter& meter, const c10::Device& device, Precision precision,
                                  const FastPaths& paths, bool again = false);

/// The session: made before anything else is attached to the probe (it sets the probe's
/// footprint, measures the GEMM rate while nothing else runs, and attaches the FLOP counter),
/// then run() once.
class WorkloadSearch {
 public:
  /// Checks the options (UsageError naming the option) and the footprint on the model.
  WorkloadSearch(Probe& probe, MemoryMeter& meter, WorkloadSearchOptions options, int world_size = 1);
  /// Runs the search. `next_batch` gives goodput's noise-scale batches, `data` names them.
  /// `dist`: several ranks (nullptr: one process); every rank calls it with the same options.
  WorkloadSearchResult run(DistGroup* dist, const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                           const WorkloadSearchProgress& progress = {});
  /// The peak MFU is counted against (measured again when a trial outran the first).
  const GemmPeak& peak() const { return compute_->peak(); }

 private:
  Probe& probe_;
  WorkloadSearchOptions options_;
  std::unique_ptr<ComputeObserver> compute_;
  std::unique_ptr<ModelSnapshot> initial_;  ///< goodput: the weights the noise is measured at
};

/// "memory_breakdown": the recommended batch's breakdown (trials recorded by a MemoryObserver),
/// with its batch; nothing when that trial has none.
void add_memory_breakdown_json(nlohmann::json& j, const SearchResult& result);

}  // namespace saturate

// Implements: the search on a user's own step (Python's `saturate.search`, a C++ caller's
// UserTrialStep): options in, checked once here, a typed result out. Under the budget (restored
// afterwards), with FLOPs counted from the step's operators against the device's measured GEMM
// rate, optionally the monitor's findings per trial, and the objective: the largest batch under
// the target (memory), the knee of the samples/s curve (throughput), or goodput with the noise
// scale measured from the step's own gradients (the caller's NoiseMeasure).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/memory_meter.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/probe/user_step.h"
#include "saturate/report/report.h"
#include "saturate/report/run_context.h"
#include "saturate/search/decision.h"
#include "saturate/search/objective.h"
#include "saturate/search/fast_path_choice.h"
#include "saturate/search/search.h"

namespace saturate {

struct UserSearchOptions {
  /// strategy, target_fraction (0, 1], max_batch >= 0 (0: none), start_batch >= 1,
  /// warmup_steps >= 0, measure_steps >= 1, confirm_runs 0..10; memory_warmup_steps follows
  /// warmup_steps (at most 1: a step that is a whole loop needs none).
  SearchOptions search;
  /// Which batch is best among those that fit (memory, throughput, goodput).
  ObjectiveOptions objective;
  /// budget_bytes >= 0: the memory the search may use (0: the meter's budget as it is; on CPU
  /// a budget must then be installed). Put back as it was when the search ends.
  int64_t budget_bytes = 0;
  /// monitor: per-trial utilization, phases and the bottleneck verdict.
  bool monitor = false;
  /// exact_ranks: with several ranks, a rank whose own limit the synced search did not reach
  /// searches on alone to report it exactly (the common batch is the same either way).
  bool exact_ranks = false;
  /// UsageError naming the option.
  void check() const;
};

struct UserSearchResult {
  SearchResult search;
  GemmPeak peak;  ///< the device's measured GEMM rate (MFU's denominator; measured again if outrun)
  std::string mfu_note;  ///< why the answer has no MFU (its rate outran the peak measured twice)
  double trials_others_busy_cpus = -1;  ///< other processes' busy CPUs over the trials (-1: not read)
  ObjectiveOutcome objective;  ///< memory: the recommended batch, nothing timed
  int world_size = 1;
  std::vector<RankMax> ranks;  ///< each rank's own budget and maximum (several ranks)
  std::string ranks_backend;   ///< what carried the ranks' collectives
  /// The one answer (search/decision.h): the batch to train at, what chose it and why.
  BatchDecision decision() const;
  /// decision().batch: the objective's batch, capped at the recommended one (0: none within the target).
  int64_t batch() const;
  /// The FLOPs, the rate at the throughput batch, the GEMM peak and the MFU (report/report.h).
  ComputeSummary compute() const;
  /// The search JSON (search_json), its "compute", and "objective" unless memory.
  nlohmann::json to_json(const RunContext& context) const;
  /// For people: the console table of `saturate search`, the answer, the objective and compute.
  std::string to_text(const RunContext& context) const;
};

/// Several ranks, each running the user's step (under torchrun): the collectives the rank-synced
/// search agrees through (dist/rank_synced.h), and what carries them.
struct UserSearchRanks {
  Collectives* comm = nullptr;
  std::string backend;
};

/// Runs the search. `noise` measures the noise scale for goodput (UsageError without one). With
/// `ranks` of more than one rank, every rank runs the same trials and gets the same answer (an OOM
/// on any rank is one for all; the objective must then be memory: the throughput curve is timed
/// in one process). A collective: every rank calls it with the same options.
UserSearchResult run_user_search(UserTrialStep& step, MemoryMeter& meter, const UserSearchOptions& options,
                                 const NoiseMeasure& noise = {}, const std::string& noise_data = "the step's batches",
                                 const UserSearchRanks& ranks = {});

/// The fast paths that apply to a user's own step (seed B7): the process-wide switches —
/// cudnn.benchmark and TF32 on CUDA, half the CPU threads on a CPU — each timed at `batch`
/// (`timed_steps` per trial, 3 rounds a side) against the choice so far, kept when the step runs
/// at least 3 % faster. The switches are put back as they were afterwards: apply the chosen ones
/// yourself (FastPathChoice::chosen names them). channels_last and fused optimizers change the
/// user's model and optimizer, which saturate does not own: not tried.
inline constexpr int kFastPathTimedSteps = 3;  ///< try_user_fast_paths' steps per timed trial
FastPathChoice try_user_fast_paths(UserTrialStep& step, MemoryMeter& meter, int64_t batch,
                                   int timed_steps = kFastPathTimedSteps);

/// Sets a meter's budget for a session and puts it back afterwards: on CPU the budget as it was,
/// on CUDA the whole device (the only fraction LibTorch can report). 0: nothing changes.
class ScopedBudget {
 public:
  ScopedBudget(MemoryMeter& meter, int64_t budget_bytes);
  ~ScopedBudget();
  ScopedBudget(const ScopedBudget&) = delete;
  ScopedBudget& operator=(const ScopedBudget&) = delete;

 private:
  MemoryMeter& meter_;
  bool changed_;
  int64_t before_;
};

}  // namespace saturate

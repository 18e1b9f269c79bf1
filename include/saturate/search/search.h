// Implements: the batch-size search.
//  - power, binsearch: Lightning's BatchSizeFinder (double from 2 until OOM; binsearch then
//    bisects between the last fit and the first OOM), kept for comparison.
//  - fit (default): two small memory probes, a line peak(b) = fixed + per_sample*b, a jump to the
//    predicted largest batch, verification, and a bracket search guided by the local law. Answers
//    are exact (max_batch fits, max_batch+1 does not) and every one is backed by a trial run.
//  - divisors: only the divisors of max_batch (a micro-batch that splits an effective batch into
//    whole accumulation steps): the largest that fits, the next divisor seen not to fit.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "saturate/search/memory_law.h"
#include "saturate/probe/trial.h"

namespace saturate {

enum class Strategy { kFit, kPower, kBinsearch, kDivisors };
std::string to_string(Strategy s);
/// "fit" | "power" | "binsearch" | "divisors"; throws UsageError otherwise.
Strategy parse_strategy(const std::string& text);

struct SearchOptions {
  Strategy strategy = Strategy::kFit;
  /// The recommended batch's measured peak may use at most this fraction of the budget.
  double target_fraction = 0.9;
  /// Upper limit on batches tried (0: none); divisors: the batch whose divisors are tried (required).
  int64_t max_batch = 0;
  /// First batch of power/binsearch (Lightning's init_val); divisors: the largest divisor at or
  /// below it is tried first.
  int64_t start_batch = 2;
  /// Steps of each timed trial (Lightning runs 3 per trial).
  int warmup_steps = 1;
  int measure_steps = 2;
  /// Untimed steps before the one recorded step of a memory-only trial (the probes of the
  /// boundary): 1, so that the first step creates the optimizer state and the second runs with
  /// it; 0 where one step already runs several optimizer steps (a user's whole loop per call).
  int memory_warmup_steps = 1;
  /// Safety net against a runaway search.
  int max_trials = 64;
  /// Re-probe the found boundary (max_batch and max_batch+1) this many more times (fit and
  /// binsearch; 0: no re-probes). Memory that varies from run to run (CPU kernels choosing other
  /// algorithms and buffers) moves the boundary: the answer becomes the largest batch that
  /// passed every probe, and the spread is reported.
  int confirm_runs = 0;
  /// samples/s within this fraction of the best count as saturated (seed B1).
  double throughput_tolerance = 0.03;
  /// Called after every trial (progress reporting); may be empty.
  std::function<void(const Trial&)> on_trial;
  /// UsageError naming the option (target_fraction, max_batch, start_batch, warmup_steps,
  /// measure_steps, confirm_runs, max_trials) when one is out of range; search_batch_size checks.
  void check() const;
};

struct SearchResult {
  Strategy strategy = Strategy::kFit;
  std::vector<Trial> trials;
  int64_t budget_bytes = 0;
  int64_t target_bytes = 0;
  int64_t max_batch = 0;           ///< 0 when batch 1 does not fit
  bool max_batch_exact = false;    ///< max_batch fits and max_batch+1 was seen not to
  bool capped = false;             ///< the search stopped at SearchOptions::max_batch
  int confirm_runs = 0;             ///< re-probes of the boundary that ran (0: not checked)
  /// With confirm_runs: every re-probe agreed (max_batch fit again, max_batch+1 failed again).
  bool boundary_confirmed = false;
  /// With confirm_runs: batches between the largest batch that fit in every probe (max_batch)
  /// and the largest that fit in any; 0 when the boundary held.
  int64_t boundary_spread = 0;
  int64_t recommended_batch = 0;   ///< largest batch whose measured peak <= target
  bool recommended_exact = false;  ///< recommended+1 was seen over the target
  int64_t throughput_batch = 0;    ///< smallest measured batch within tolerance of the best samples/s
  MemoryLaw memory_model;          ///< least squares over every fitting trial (allocated bytes)
  int64_t trial_steps = 0;         ///< every training step the search ran
  double search_seconds = 0;
  std::string error;               ///< set when a trial failed with a non-memory error
};

/// Runs the search. Never throws for an OOM: it is a result.
SearchResult search_batch_size(TrialRunner& runner, const SearchOptions& options);

/// Memory a search's step kept alive from one call to the next (a step that appends its outputs
/// or its loss tensors to a list): each trial's allocated bytes after its last step minus after
/// its first (Trial::step_growth_bytes; a cache sized at the first step does not count). Such a
/// step's max holds for a run of as many steps as a trial has, not for training.
struct MemoryGrowth {
  int64_t retained_bytes = 0;  ///< kept alive by the trials that grew (allocated after minus before each)
  int trials_grew = 0;         ///< trials that held more after their last step than after their first
  int64_t at_batch = 0;        ///< the largest batch that fit and grew (0: none)
  int64_t bytes_per_step = 0;  ///< its growth per step
  /// More than max(1 MiB, 1 % of the budget) grown between steps, in at least two trials: not
  /// the allocator's one-off.
  bool significant = false;
  /// For people: what grew, by how much, what it means for the max and how to fix the step; ""
  /// when not significant.
  std::string warning() const;
};
MemoryGrowth memory_growth(const SearchResult& r);

}  // namespace saturate

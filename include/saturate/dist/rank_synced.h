// Implements: rank-synced batch-size search (seed M10; the cross-rank OOM synchronisation that
// Lightning's finder lacks). RankSyncedRunner wraps this rank's TrialRunner: it runs the local
// trial, then one all-reduce makes every rank see the same result: an OOM (or error) on any
// rank is one for all, the peaks and step time (and own speed) are the worst rank's, the budget
// the smallest.
// The search itself (search_batch_size) is deterministic in what it is told, so it takes the
// same path on every rank and no rank waits in a collective the others never enter.
// After the search, rank_maxima() reports each rank's own largest batch (ranks with more
// memory continue alone above the common maximum when asked) and the common one is used.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/dist/collectives.h"
#include "saturate/search/search.h"
#include "saturate/search/throughput_curve.h"
#include "saturate/probe/trial.h"

namespace saturate {

class RankSyncedRunner final : public TrialRunner {
 public:
  /// A collective: every rank constructs it at the same point.
  RankSyncedRunner(TrialRunner& local, Collectives& comm);
  Trial run(int64_t batch, const TrialRequest& request) override;
  /// The smallest budget over the ranks.
  int64_t budget_bytes() const override { return budget_bytes_; }
  /// The largest granularity over the ranks.
  int64_t granularity_bytes() const override { return granularity_bytes_; }

  /// This rank's own trials, before they were combined.
  const std::vector<Trial>& local_trials() const { return local_trials_; }
  int64_t local_budget_bytes() const { return local_.budget_bytes(); }
  TrialRunner& local() { return local_; }
  Collectives& comm() { return comm_; }

 private:
  TrialRunner& local_;
  Collectives& comm_;
  int64_t budget_bytes_ = 0;
  int64_t granularity_bytes_ = 0;
  std::vector<Trial> local_trials_;
};

struct RankMax {
  int rank = 0;
  int64_t budget_bytes = 0;
  int64_t max_batch = 0;   ///< largest batch seen to fit on this rank
  bool exact = false;      ///< max_batch+1 was seen not to fit on this rank
};

/// Each rank's largest batch, gathered on every rank (a collective). With `refine`, a rank
/// whose own limit the synced search did not reach runs a local search (no collectives) with
/// `options` to find it exactly; the others wait for it in the gather.
std::vector<RankMax> rank_maxima(RankSyncedRunner& runner, const SearchOptions& options, bool refine);

struct DistSearchResult {
  SearchResult result;
  std::vector<RankMax> ranks;  ///< empty for one process
};
/// The search, rank-synced through `comm` when given (every rank gets the same result), then
/// each rank's own maximum (refined exactly with `exact_ranks`). nullptr: a plain search.
DistSearchResult search_across_ranks(TrialRunner& runner, const SearchOptions& options, Collectives* comm,
                                     bool exact_ranks);

/// Every rank's throughput curve (each timed alone, no collectives in its steps) made one: at each
/// of the `planned` batches the slowest rank's samples/s (a data-parallel step waits for it), ok
/// only when it ran on every rank (the curve ends at the first that did not), settled only when
/// settled on every rank; best, plateau, dips and knee again. A collective: every rank calls it
/// and gets the same curve, so decisions taken from it agree.
ThroughputCurve slowest_curve_across_ranks(const ThroughputCurve& mine, const std::vector<int64_t>& planned,
                                           Collectives& comm);

/// `world_size` and `ranks` [{rank, budget_bytes, max_batch, max_batch_exact}] for search JSON.
void add_rank_json(nlohmann::json& j, int world_size, const std::vector<RankMax>& ranks);

}  // namespace saturate

// Implements: the re-split of unequal shares during training (`shares` auto, issue 28). The
// shares are first split by each rank's speed timed alone before training; a rank's speed moves
// once training runs (another process takes its core, a card heats up and clocks down, its loader
// competes with its step), and a split made once then leaves the fast ranks waiting. Every few
// steps each rank's busy time (its step less its waits for the others) is gathered and the global
// batch split anew in proportion to each rank's samples per busy second, when that is predicted to
// shorten the slowest rank's part by enough to pay. The split's fixed point is equal busy times
// (a rank's fixed per-step costs included), so repeated re-splits converge. Pure: the ranks'
// numbers in, the decision out; train_ranks.cpp gathers and applies it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace saturate {

struct ShareBalanceOptions {
  /// A look at the ranks' busy times every this many steps (a collective); 0: never re-split.
  /// Not given: every 10 steps for shares split by speed (`shares` auto), never for given shares
  /// (given with them, the given split is where the re-splits start).
  std::optional<int64_t> every_steps;
  /// Re-split only when the slowest rank's busy time per step is predicted to shrink at least
  /// this many times (noise on shared cores moves a balanced split's busy times by a few %).
  double min_gain = 1.05;
  /// every_steps, or its default for shares split by speed or given.
  int64_t looks_every(bool shares_by_speed) const { return every_steps.value_or(shares_by_speed ? 10 : 0); }
};

/// One look at the ranks: each rank's busy time per step over the steps since the last look, the
/// speed it gives (share / busy) and what a split by those speeds predicts.
struct ShareBalance {
  int64_t step = 0;                    ///< steps done when the ranks were looked at
  std::vector<int64_t> shares;         ///< as they were
  std::vector<double> busy_ms;         ///< each rank's step less its waits, per step (mean)
  std::vector<double> samples_per_s;   ///< share / busy
  std::vector<int64_t> proposed;       ///< the global batch split by those speeds
  double slowest_busy_ms = 0;          ///< the largest busy_ms: what every rank's step waits for
  double predicted_slowest_ms = 0;     ///< the largest of proposed share / speed
  double gain = 1;                     ///< slowest_busy_ms / predicted_slowest_ms
  bool resplit = false;                ///< proposed differs and gain >= min_gain (min_gain 1: differs)
};

/// The decision for `shares` (one per rank, their sum the global batch) and each rank's busy time
/// per step. A rank's speed is taken as share / busy (its part of the step scales with its share);
/// UsageError-free: a non-positive or non-finite busy time leaves the shares as they are.
ShareBalance balance_shares(const std::vector<int64_t>& shares, const std::vector<double>& busy_ms, double min_gain);

/// "step 20: shares 1393,655 -> 1480,568 (busy 41.2 / 52.9 ms a step; predicted 1.12x)".
std::string share_change_text(const ShareBalance& b);

}  // namespace saturate

// Implements: the search `saturate search` runs, as one library call: rank-synced when several
// ranks take part (rank_synced.h), and with `--checkpointing auto` twice on the same budget —
// without activation checkpointing and with it on every block — followed by the choice
// (search/checkpointing_choice.h). The probe is left set to the chosen policy, so what runs next
// on it (a memory plan, a confirmation) measures the chosen step.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "saturate/dist/rank_synced.h"
#include "saturate/probe/probe.h"
#include "saturate/search/checkpointing_choice.h"

namespace saturate {

struct SearchRunOptions {
  SearchOptions search;
  /// Compare no checkpointing with `with_policy` (a model without blocks is searched once and
  /// `not_compared` says why).
  bool compare_checkpointing = false;
  CheckpointPolicy with_policy{1};
  /// The micro-batch the user needs (0: none): checkpointing wins when only it fits it.
  int64_t required_batch = 0;
  /// Several ranks: refine each rank's own maximum exactly (rank_maxima's `refine`).
  bool exact_ranks = false;
  /// Told before each pass ("1/2 without checkpointing", ...); may be empty.
  std::function<void(const std::string&)> on_pass;
};

struct SearchRun {
  DistSearchResult chosen;             ///< the answer: the chosen curve's
  std::optional<SearchResult> without;  ///< both curves, when compared
  std::optional<SearchResult> with;
  std::optional<CheckpointingChoice> choice;
  std::string not_compared;             ///< why checkpointing was not compared (asked, no blocks)
};

/// `comm`: the ranks' collectives (nullptr: one process).
SearchRun run_search(Probe& probe, const SearchRunOptions& options, Collectives* comm);

}  // namespace saturate

// Implements: choosing among configurations of one step (seed B5's precision, M5's activation
// checkpointing, or any switch a user's step takes as `step(batch_size, config)`), each searched
// on the same budget. The first configuration is the baseline; another is chosen only when it
// wins: its fastest usable batch runs measurably faster (beyond `tolerance`), or the batch the
// user needs fits only with it. The rule of `search --checkpointing auto`, for N configurations.
// LibTorch-free, tested with fake results.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/search/checkpointing_choice.h"
#include "saturate/search/search.h"

namespace saturate {

struct ConfigChoice {
  size_t chosen = 0;            ///< index into the configurations
  std::string reason;           ///< one sentence with the figures
  std::vector<BestBatch> best;  ///< each configuration's fastest usable batch
};

/// `results[i]` is the search of configuration `names[i]` (same size, at least one). With
/// `required_batch` > 0 only configurations whose max_batch reaches it are candidates (the
/// baseline when none does, and the reason says so). UsageError for mismatched sizes.
ConfigChoice choose_config(const std::vector<SearchResult>& results, const std::vector<std::string>& names,
                           int64_t required_batch, double tolerance = 0.03);

}  // namespace saturate

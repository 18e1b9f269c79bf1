// Implements: `search --checkpointing auto` (issue #4 item 4): the search run without and with
// activation checkpointing on the same budget, both curves kept, and the choice. Checkpointing
// trades recomputation for memory, so it is chosen only when it wins: when it lets a batch fit
// that the search could not use without it and that batch runs measurably faster than the best
// batch without it, or when the batch the user needs (--required-batch) only fits with it.
// LibTorch-free (policies are named by their strings), so it is tested with fake results.
#pragma once
#include <cstdint>
#include <string>

#include "saturate/search/search.h"

namespace saturate {

/// The fastest measured batch of a search among those the recommendation allows
/// (ok trials with batch <= recommended_batch; every ok trial when nothing is recommended).
struct BestBatch {
  int64_t batch = 0;  ///< 0 when no trial ran
  double samples_per_s = 0;
};
BestBatch best_usable_batch(const SearchResult& r);

/// samples/s measured at exactly `batch` (an ok trial), or 0 when no trial ran there.
double measured_samples_per_s(const SearchResult& r, int64_t batch);

struct CheckpointingChoice {
  std::string choice;  ///< "none" or the checkpointing policy's name ("blocks")
  std::string reason;  ///< one sentence with the figures
  BestBatch best_without;
  BestBatch best_with;
};

/// Chooses between a search without checkpointing and one with `with_policy` (e.g. "blocks").
/// `required_batch` > 0: the micro-batch the user needs. `tolerance`: a win within this
/// fraction of the best samples/s without checkpointing is noise, not a win (the search's
/// throughput tolerance, 3 %).
CheckpointingChoice choose_checkpointing(const SearchResult& without, const SearchResult& with,
                                         const std::string& with_policy, int64_t required_batch, double tolerance);

}  // namespace saturate

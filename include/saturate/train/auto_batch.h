// Implements: `train --batch auto`: the micro-batch found by a search whose trials run the step
// training will run — its precision, checkpointing, clipping and optimizer, a whole global batch
// split into micro-batches, the loader's prefetched global batches and the evaluation pass —
// so that training starts at the largest micro-batch that trains, without an OOM back-off.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "saturate/core/memory_meter.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/probe/workload_trial_step.h"
#include "saturate/search/search.h"
#include "saturate/train/batch_plan.h"

namespace saturate {

struct AutoBatchOptions {
  /// The step as training runs it; global_batch is filled from the request.
  TrainingFootprint footprint;
  BatchRequest request;
  SearchOptions search;  ///< max_batch is set to the request's limit
  /// Runs the search (a rank-synced one under data parallelism); empty: search_batch_size.
  std::function<SearchResult(TrialRunner&, const SearchOptions&)> run_search;
  /// Probe observers (not owned), e.g. a progress printer.
  std::vector<ProbeObserver*> observers;
};

struct AutoBatch {
  int64_t micro_batch = 0;
  BatchPlan plan;
  SearchResult search;
  int64_t resident_data_bytes = 0;  ///< the loader's batches held beside the step, at the pick
  std::string reason;               ///< why this micro-batch, in words
};

/// Searches and plans. Throws RuntimeFailure when the search fails or not even micro-batch 1
/// fits (the message says what the resident data takes and what to lower).
AutoBatch choose_micro_batch(Workload& workload, MemoryMeter& meter, const AutoBatchOptions& options);

}  // namespace saturate

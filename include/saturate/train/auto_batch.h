// Implements: `train --batch auto`: the micro-batch found by a search whose trials run the step
// training will run — its precision, checkpointing, clipping and optimizer, a whole global batch
// split into micro-batches, the loader's prefetched micro-batches and the evaluation pass —
// so that training starts at the largest micro-batch that trains, without an OOM back-off.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "saturate/core/memory_meter.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/probe/workload_trial_step.h"
#include "saturate/search/search.h"
#include "saturate/data/batch_plan.h"

namespace saturate {

struct AutoBatchOptions {
  /// The step as training runs it; global_batch is filled from the request.
  TrainingFootprint footprint;
  BatchRequest request;
  /// max_batch: at most this (the samples one rank's data holds; 0: no limit), lowered to the
  /// request's limit.
  SearchOptions search;
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

/// The evaluation's own batch (issue 26, seed M3): searched with training's state held at the
/// micro-batch it trains with (WorkloadTrialStep's eval_search_micro_batch), so the answer is
/// the evaluation's, not a multiple of training's guessed.
struct AutoEvalBatchOptions {
  /// The step as training runs it (its precision, checkpointing, loaders' windows).
  TrainingFootprint footprint;
  int64_t micro_batch = 0;   ///< training's micro-batch, >= 1
  int64_t rank_batch = 0;    ///< training's samples per step on this rank (0: the micro-batch)
  int64_t max_eval_batch = 0;  ///< the evaluation data's size: no larger batch is tried (0: no cap)
  SearchOptions search;
  std::function<SearchResult(TrialRunner&, const SearchOptions&)> run_search;
  std::vector<ProbeObserver*> observers;
};

struct AutoEvalBatch {
  int64_t eval_batch = 0;
  SearchResult search;
  std::string reason;  ///< why this batch, in words
};

/// Searches the evaluation batch. Throws UsageError for a micro-batch below 1, RuntimeFailure
/// when the search fails or not even an evaluation batch of 1 fits beside training's state.
AutoEvalBatch choose_eval_batch(Workload& workload, MemoryMeter& meter, const AutoEvalBatchOptions& options);

}  // namespace saturate

// Implements: `saturate search` as one library call. On an opened workload (and its data, when
// given): the memory observer (memory_breakdown per trial), the loader as the trials' batches
// with `workers` auto tuned first, the monitor, the rank-synced search with the objective,
// checkpointing and fast paths (session/workload_search.h), `plan_for`'s prediction for another
// GPU, the JSON, the notes for people, and, when there is no answer, why. Options in, checked
// once; progress as events; nothing printed.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/dist/process_group.h"
#include "saturate/memory/plan_runner.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/session/data_session.h"
#include "saturate/session/workload_search.h"
#include "saturate/session/workload_session.h"

namespace saturate {

/// `plan_for` and its companions: predict the batch for another GPU from two small batches
/// recorded here (memory/plan_runner.h).
struct PlanForOptions {
  std::string plan_for;              ///< a card (h100-80gb) or a size (24GiB); "": no plan
  std::string plan_batches = "4,8";  ///< the two batches recorded
  std::string plan_allocator;        ///< cuda-caching (""), or exact (a CPU budget)
  bool plan_only = false;            ///< predict only, no search here
  /// UsageError naming the option (before any device work).
  void check() const;
};
/// The plan `options` ask for on `session`'s workload, or nullopt when they ask for none.
std::optional<PlanResult> run_plan_for(const PlanForOptions& options, WorkloadSession& session,
                                       double target_fraction);

struct SearchSessionOptions {
  WorkloadSearchOptions search;
  PlanForOptions plan;
  DataOptions data;                      ///< its data, opened by open_data (OpenedData)
  std::optional<MonitorOptions> monitor;  ///< nullopt: no monitor (`no_monitor`)
};

struct SearchSessionEvents {
  WorkloadSearchProgress progress;
  DataEvents data;
  std::function<void(const std::string&)> on_warning;  ///< no NVML on a CUDA run, ...
};

/// The worst case a text search sized for: which documents, how long, and the token budget; and
/// the same search on documents of the median length beside it (the JSON's `worst_case`).
struct TextWorstCase {
  int64_t documents = 0;
  int64_t longest_tokens = 0;
  int64_t median_tokens = 0;
  std::vector<int64_t> worst_documents;
  int64_t max_tokens = 0;
  int64_t recommended_tokens = 0;
  struct Median {  // the search on median-length documents
    int64_t max_batch = 0;
    bool max_batch_exact = false;
    int64_t recommended_batch = 0;
    int64_t trials = 0;
  };
  std::optional<Median> median;  ///< none when that search failed
};

struct SearchSessionResult {
  WorkloadSearchResult found;
  std::optional<PlanResult> plan;
  std::optional<DataSource> data;           ///< the data the trials read, when given
  std::optional<TextWorstCase> worst_case;  ///< text:FILE data: the documents it sized for
  std::string notes;                        ///< for people, after the answer (console and markdown)
  /// Why there is no answer (an error, batch 1 too large, no batch within the target); "" when
  /// there is one. Options are named in backticks.
  std::string failure;
  /// The search JSON (docs/search.md): the workload search's, with the plan, the memory
  /// breakdown at the recommended batch and the worst case.
  nlohmann::json to_json(const RunContext& context) const;
};

/// What the trials read: the data's name, or synthetic batches (the noise scale's `data` in the JSON).
std::string trial_data_name(const OpenedData& data);

/// Searches on `session` (its context's command and world size set by the caller). `dist`: one
/// rank of several (nullptr: one process); every rank calls it with the same options.
SearchSessionResult run_search_session(WorkloadSession& session, const OpenedData& data,
                                       const SearchSessionOptions& options, DistGroup* dist,
                                       const SearchSessionEvents& events = {});

}  // namespace saturate

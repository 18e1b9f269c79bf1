// Implements: what a training run hands back (`saturate train`'s summary and JSON, docs/train.md):
// the trainer's result with the run's settings, the held-out split's results under its own name,
// the leak watch, the monitor's summary, the objective and --adaptive's decisions, the gradient
// noise scale, the compute (FLOPs, MFU) and how the run ended. Typed, with to_json giving the
// train JSON every printer and the HTML report read; the ranks' part is added by who ran them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "saturate/memory/leak_detector.h"
#include "saturate/memory/leak_sites.h"
#include "saturate/monitor/train_monitor.h"
#include "saturate/probe/findings.h"
#include "saturate/report/run_context.h"
#include "saturate/search/objective.h"
#include "saturate/search/search.h"
#include "saturate/train/adaptive_batch.h"
#include "saturate/train/trainer.h"

namespace saturate {

struct TrainAdaptiveSummary {
  int64_t base_batch = 0;
  int64_t max_global_batch = 0;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  double lr_gain = 1;
  LrRule lr_rule = LrRule::kAdaScale;
  std::vector<AdaptiveChange> changes;
  double step_comm_ms = 0;  ///< the all-reduce each step's goodput counted (several ranks)
};
/// `adaptive`'s state at the end of a run whose global batch moved in units of `base_batch`.
TrainAdaptiveSummary adaptive_summary(const AdaptiveBatch& adaptive, int64_t base_batch, int64_t max_units,
                                      LrRule rule);

struct TrainNoiseSummary {
  std::optional<double> value;
  double gradient_sq_norm = 0;
  double trace_covariance = 0;
  int64_t measurements = 0;
};

struct TrainInterruption {
  std::string signal;  ///< "SIGINT", ...
  int exit_status = 0;
  int64_t after_step = 0;
  std::string checkpoint;  ///< "" : no checkpoint directory
};

/// FLOPs of the run's first step (counted), the rate the run sustained and its MFU against the
/// device's measured GEMM rate (every rank's: MFU per device).
struct TrainCompute {
  double flops_per_sample = 0;
  std::optional<double> analytic_flops_per_sample;
  double achieved_flops_per_s = 0;
  double peak_flops_per_s = 0;
  std::string peak_method;
  std::optional<double> mfu;  ///< never above 1 (checked_mfu); none when the rate outran the peak measured twice
  std::string mfu_note;       ///< why there is no MFU
  /// flops_per_sample, flops_method, analytic_flops_per_sample, achieved_flops_per_s,
  /// peak_flops_per_s, peak_method, mfu (null with mfu_note).
  nlohmann::json to_json() const;
};

struct TrainSummary {
  RunContext context;
  std::string data;
  std::string precision;
  std::string checkpointing;
  std::string fast_paths;
  int64_t loss_every = 1;
  TrainResult result;
  /// "test", "val", or "" when the run had no held-out data.
  std::string eval_split;
  int64_t eval_batch = 0;  ///< the evaluation's batch (0: no evaluation)
  /// eval_batch auto: the evaluation's own search (train/auto_batch.h's choose_eval_batch).
  std::optional<SearchResult> eval_search;
  /// batch auto: the micro-batch's search, and the tokens per sample it was sized at (text:FILE's
  /// longest document; 0: the workload's own shape).
  std::optional<SearchResult> batch_search;
  int64_t batch_search_tokens = 0;
  LeakReport leak;
  std::vector<LeakSite> leak_sites;
  std::optional<TrainMonitorSummary> monitor;
  std::optional<ObjectiveOutcome> objective;  ///< --objective throughput|goodput chose the micro-batch
  std::optional<TrainAdaptiveSummary> adaptive;
  std::optional<TrainNoiseSummary> noise;
  std::optional<TrainInterruption> interrupted;
  std::optional<TrainCompute> compute;  ///< nullopt when the run counted no FLOPs
  int workers = 0;                       ///< loader threads (0: in the training thread, as token data)
  std::optional<WorkerTuning> workers_auto;  ///< `workers` auto: the tuning that chose `workers`

  /// The train JSON (docs/train.md), without the ranks' keys.
  nlohmann::json to_json() const;
};

}  // namespace saturate

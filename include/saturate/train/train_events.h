// Implements: what a training run reports as it goes (all optional; the library prints nothing):
// the micro-batch search's trials and choices, the objective's and `adaptive`'s decisions, the
// start, each step, evaluations, back-offs, re-splits and warnings. Emitted by
// session/train_session.h; report/progress_lines.h turns them into lines.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "saturate/probe/findings.h"
#include "saturate/probe/trial.h"
#include "saturate/search/objective.h"
#include "saturate/train/adaptive_batch.h"
#include "saturate/train/auto_batch.h"
#include "saturate/train/share_balance.h"

namespace saturate {

/// The run's shape once the batch is chosen, for the start of a progress display.
struct TrainStart {
  std::string data;
  int64_t micro_batch = 0;
  int64_t accumulation = 0;
  int world_size = 1;
  int64_t global_batch = 0;  ///< all ranks
  int64_t rank_batch = 0;    ///< this rank's samples of every global batch
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  double peak_lr = 0;
};

/// One optimizer step done, for progress lines.
struct TrainProgress {
  int64_t step = 0;  ///< 1-based
  int64_t total_steps = 0;
  double loss = 0;
  double lr = 0;
  std::optional<double> steps_per_s;     ///< the recent pace (none until measured)
  std::optional<double> seconds_left;    ///< at that pace
  bool noise_measured = false;           ///< noise_scale or adaptive: noise_scale is this run's
  std::optional<double> noise_scale;
  std::string monitor_status;            ///< the monitor's one-line status ("" without one)
};

/// Progress for people (all optional); the library prints nothing.
struct TrainEvents {
  std::function<void(const Trial&)> on_trial;              ///< micro_batch 0: each search trial
  std::function<void(const AutoBatch&)> on_auto_batch;     ///< the micro-batch the search chose
  std::function<void(const AutoEvalBatch&)> on_auto_eval_batch;  ///< the evaluation batch it chose
  std::function<void(const WorkerCurvePoint&)> on_workers_point;  ///< `workers` auto: each count timed
  std::function<void(const WorkerTuning&)> on_workers_chosen;     ///< and the count it chose
  /// The objective's curve and noise-scale progress, given the noise batches' data name.
  std::function<ObjectiveProgress(const std::string& data)> objective;
  std::function<void(const ObjectiveOutcome&)> on_objective;
  std::function<void(int64_t max_micro_batch)> on_adaptive_curve;  ///< timing the curve starts
  std::function<void(int64_t global_batch, int64_t micro_batch)> on_adaptive_start;
  std::function<void(const TrainStart&)> on_start;
  std::function<void(const TrainProgress&)> on_step;
  std::function<void(int64_t epoch, double loss, double accuracy)> on_eval;
  std::function<void(const AdaptiveChange&, int64_t micro_batch, double lr_gain)> on_adapt;
  std::function<void(int64_t step, int64_t old_micro, int64_t new_micro)> on_backoff;
  /// `shares` auto re-split the ranks' shares during training (from the next step on): what was
  /// looked at and this rank's micro-batch and accumulation now.
  std::function<void(const ShareBalance&, int64_t micro_batch, int64_t accumulation)> on_reshare;
  /// An evaluation ran out of memory: its batches now run in chunks of new_chunk.
  std::function<void(int64_t step, int64_t old_chunk, int64_t new_chunk)> on_eval_backoff;
  std::function<void(const std::string&)> on_warning;  ///< a leak seen, no NVML, ...
};

}  // namespace saturate

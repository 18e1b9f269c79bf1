// Implements: the lines a front-end shows while a session runs (what `saturate search` and
// `train` write on stderr, and what Python shows with verbose=True): each line goes to `line` as
// it happens, without its newline, naming options in backticks (`micro_batch` auto), which the
// front-end says its own way (core/option_text.h). Nothing here prints by itself.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "saturate/data/data_events.h"
#include "saturate/search/objective.h"
#include "saturate/search/search_progress.h"
#include "saturate/step/activation_checkpoint.h"
#include "saturate/step/precision.h"
#include "saturate/train/train_events.h"

namespace saturate {

using LineSink = std::function<void(const std::string&)>;

/// The objective's curve (one line per batch timed) and the noise scale's start; `data` names
/// the batches the noise is measured on.
ObjectiveProgress objective_progress_lines(const LineSink& line, const std::string& data);

/// What the data opened and what `workers` auto measured and chose.
DataEvents data_progress_lines(const LineSink& line);

/// The search's progress: checkpointing auto's passes and the objective's lines when `talk`; the
/// fast paths tried when `fast_paths`.
WorkloadSearchProgress search_progress_lines(const LineSink& line, const std::string& data, bool talk,
                                             bool fast_paths);

/// What the training's progress lines need to know beyond the events: how the run was set up.
struct TrainLinesStyle {
  std::string model_name;
  std::string device_info;
  int64_t log_every = 50;  ///< a step line every N steps (and the last)
  Objective objective = Objective::kMemory;
  Precision precision = Precision::kFp32;
  CheckpointPolicy checkpointing;
  int64_t base_batch = 0;     ///< `adaptive`'s unit (the base batch in effect)
  int64_t adaptive_max = 64;  ///< `adaptive`: at most this many units
  int64_t adapt_every = 50;   ///< `adaptive`: steps between decisions
};
/// The training's progress: the search's trials with `micro_batch` auto, the objective's and
/// `adaptive`'s decisions, the start, a line every `log_every` steps, evaluations and back-offs;
/// warnings go to `warning` (also when `quiet`, which drops everything else).
TrainEvents train_progress_lines(const LineSink& line, const LineSink& warning, const TrainLinesStyle& style,
                                 const std::string& eval_split, bool quiet);

}  // namespace saturate

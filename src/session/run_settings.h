// Implements: the settings of a training run as one record, {option, value}, for two checks
// before any training: every rank of a job runs with the same settings (a digest of each is
// gathered at the start and the first difference named: ranks with different `seed` or `epochs`
// would train different models or wait on each other until the timeout), and a resume keeps every
// setting that changes the math. What may change on resume is listed (`may_change_on_resume`):
// the run's length, logging, evaluation, checkpoint cadence, the loader's threads, the fast
// paths and activation checkpointing (the same math), and the split of the global batch.
#pragma once
#include <string>
#include <vector>

#include "saturate/dist/collectives.h"
#include "saturate/session/train_session.h"
#include "saturate/step/workload.h"

namespace saturate {

struct RunSetting {
  std::string option;  ///< the option's name ("seed"), said in messages in backticks
  std::string value;
  bool may_change_on_resume = false;
};

/// The settings of `saturate train`'s run: the model, its optimizer, the options and the data's.
std::vector<RunSetting> train_run_settings(const Workload& workload, const TrainSessionOptions& options,
                                           const TrainSessionData& data);

/// Compares every rank's settings with rank 0's (one all-gather of a 64-bit digest per setting).
/// On every rank a difference is a UsageError naming the first setting that differs, this
/// rank's value and the rank it differs from, so that all ranks stop together before training.
void check_ranks_agree(const std::vector<RunSetting>& settings, Collectives& ranks);

/// The settings a resume must keep that the trainer does not compare itself (it keeps the
/// optimizer, precision, global batch, data, learning rate and schedule): {"`option`", value}.
std::vector<std::pair<std::string, std::string>> resume_checked_settings(const std::vector<RunSetting>& settings);

}  // namespace saturate

// Implements: a training run's summary for people (what `saturate train` prints at the end), read
// from the typed summary: what trained on what and how long, the batch, the losses on the
// held-out split under its name, the bottleneck, the ranks' all-reduce, the noise scale, the
// compute (MFU), the throughput, back-offs and checkpoints, and how an interrupted run goes on.
// Every number shown is one the JSON (TrainSummary::to_json) holds. Options in backticks.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "saturate/dist/ranks_summary.h"
#include "saturate/report/train_summary.h"

namespace saturate {

/// The summary's lines, each ending in a newline.
std::string train_summary_text(const TrainSummary& summary, const TrainRanksSummary& ranks);
/// Why a run whose checkpoint writes failed ends with an error although it trained: the first
/// failure, what was kept ({option, path} of the outputs written, e.g. {"save", "m.pt"}) and what
/// was not. "" when every checkpoint was written.
std::string checkpoint_failure_text(const TrainResult& result, const std::string& checkpoint_dir,
                                    const std::vector<std::pair<std::string, std::string>>& kept);
/// The ranks' line ("" for one process).
std::string train_rank_text(const TrainRanksSummary& ranks);

}  // namespace saturate

// Implements: the lines a search adds after its answer, for people: each rank's maximum, the fast
// paths measured (compute_text and checkpointing_auto_text: report.h, checkpointing_report.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/dist/search_run.h"
#include "saturate/search/fast_path_choice.h"

namespace saturate {

/// "ranks N (backend): rank 0 max ... of ...; every rank uses U" ("" for one process).
std::string rank_text(const std::vector<RankMax>& ranks, const std::string& backend, int64_t used);
/// The fast paths tried at `batch` and those kept, with their gains.
std::string fast_paths_text(const FastPathChoice& c, int64_t batch);

}  // namespace saturate

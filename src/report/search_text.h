// Implements: the lines a search adds after its answer, for people: the --objective's choice,
// each rank's maximum, the fast paths measured (compute_text and checkpointing_auto_text:
// report.h, checkpointing_report.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "saturate/dist/search_run.h"
#include "saturate/search/fast_path_choice.h"
#include "saturate/search/goodput.h"
#include "saturate/step/gradient_noise.h"

namespace saturate {

/// "objective ...: <reason>", with the noise scale measured on `noise_data` and the learning
/// rate's gain when goodput chose ("" for the memory objective).
std::string objective_text(Objective objective, const std::string& reason,
                           const std::optional<NoiseScaleMeasurement>& noise, const std::string& noise_data,
                           const std::optional<GoodputChoice>& goodput);

/// "ranks N (backend): rank 0 max ... of ...; every rank uses U" ("" for one process).
std::string rank_text(const std::vector<RankMax>& ranks, const std::string& backend, int64_t used);
/// The fast paths tried at `batch` and those kept, with their gains.
std::string fast_paths_text(const FastPathChoice& c, int64_t batch);

}  // namespace saturate

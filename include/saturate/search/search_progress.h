// Implements: what a workload's search reports as it goes (all optional): checkpointing auto's
// passes, the objective's curve and noise scale, the fast paths tried. Emitted by
// session/workload_search.h; report/progress_lines.h turns them into lines.
#pragma once
#include <functional>
#include <string>

#include "saturate/search/fast_path_choice.h"
#include "saturate/search/objective.h"

namespace saturate {

/// The search's progress, for people.
struct WorkloadSearchProgress {
  std::function<void(const std::string&)> on_pass;  ///< checkpointing auto's passes
  ObjectiveProgress objective;
  std::function<void(const FastPathChoice&)> on_fast_paths;
};

}  // namespace saturate

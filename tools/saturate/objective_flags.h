// --objective memory|throughput|goodput (docs/search.md, "Which batch is best"): the flags of the
// library's ObjectiveOptions (search/objective.h) and the progress lines on stderr.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "saturate/search/objective.h"

namespace saturate::cli {

struct ObjectiveFlags {
  std::string objective = "memory";
  int64_t base_batch = 0;  // 0: 32, or the largest batch when smaller
  int noise_steps = 40;
  double knee_fraction = 0.9;
};
/// --objective, --knee, --noise-steps; --base-batch too unless the command has its own.
void add_objective_flags(CLI::App& app, ObjectiveFlags& f, bool base_batch_flag);
/// The options the flags give, checked (usage errors before any device work).
ObjectiveOptions objective_options(const ObjectiveFlags& f);

}  // namespace saturate::cli

#include "step_flags.h"
#include "option_flags.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate::cli {

void add_step_flags(CLI::App& app, StepFlags& f, bool allow_auto) {
  f.allow_auto = allow_auto;
  add_option_flag(app, "precision", f.precision);
  add_option_flag(app, allow_auto ? "search.checkpointing" : "checkpointing", f.checkpointing);
  if (allow_auto) f.fast_paths = "auto";
  add_option_flag(app, allow_auto ? "search.fast_paths" : "fast_paths", f.fast_paths);
}

CheckpointPolicy step_checkpointing(const StepFlags& f) {
  if (f.allow_auto && f.checkpointing == "auto") return {};
  try {
    return parse_checkpointing(f.checkpointing);
  } catch (const UsageError&) {
    if (!f.allow_auto) throw;
    throw UsageError(fmt::format("--checkpointing: unknown value '{}' (expected none, blocks, every-N with N >= 1 "
                                 "such as every-2, or auto to compare none with blocks)",
                                 f.checkpointing));
  }
}

TrainingFootprint step_footprint(const StepFlags& f) {
  TrainingFootprint t;
  t.precision = parse_precision(f.precision);
  t.checkpointing = step_checkpointing(f);
  const bool tried = f.allow_auto && (f.fast_paths == "auto" || f.fast_paths == "try");
  if (!tried) {
    try {
      t.fast_paths = parse_fast_paths(f.fast_paths);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("--fast-paths: {}{}", e.what(), f.allow_auto ? "; or auto, or try" : ""));
    }
  }
  return t;
}

bool fast_paths_tried(const StepFlags& f, bool cuda) {
  return f.allow_auto && (f.fast_paths == "try" || (f.fast_paths == "auto" && cuda));
}


}  // namespace saturate::cli

#include "step_flags.h"

#include "option_flags.h"

namespace saturate::cli {

void add_step_flags(CLI::App& app, StepSettings& f, bool search) {
  f.search = search;
  add_option_flag(app, "precision", f.precision);
  add_option_flag(app, search ? "search.checkpointing" : "checkpointing", f.checkpointing);
  if (search) f.fast_paths = "auto";
  add_option_flag(app, search ? "search.fast_paths" : "fast_paths", f.fast_paths);
}

}  // namespace saturate::cli

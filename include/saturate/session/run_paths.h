// Implements: the paths a command's options name, for the one check before any work that no
// output replaces an input or another output (core/path_plan.h): which options are outputs,
// which folder a checkpoint option writes into and what files it writes there, which inputs a
// `data` value reads.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "saturate/core/path_plan.h"

namespace saturate {

/// What the option `option` set to `value` reads or writes: json, html, save, trace, timeline,
/// log, profile_ops and output are outputs; checkpoint_dir and resume the checkpoint folder (its
/// checkpoint and lock file); model (a file, not a zoo name), data (the path in "tokens:FILE",
/// "images:DIR", ...) and run are inputs. nullopt for an option that names no path.
std::optional<PathUse> path_use(const std::string& option, const std::string& value);

/// Before any work: no output replaces an input or another output (check_path_plan), each
/// output can be written (check_output_path, "-" is stdout) and a `checkpoint_dir` can hold
/// checkpoints (check_checkpoint_dir). UsageError naming the option.
void check_run_paths(const std::vector<PathUse>& uses);

}  // namespace saturate

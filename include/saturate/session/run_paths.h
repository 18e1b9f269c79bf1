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

/// An option of a command as the user gave it (or its default, `given` false).
struct OptionValue {
  std::string option;
  std::string value;
  bool given = true;
};

/// Before any work of `command` with `values`: the paths its options name are checked
/// (check_run_paths, defaults included: a default dataset is read too), and the settings every
/// rank must share are recorded for the rendezvous (set_job_settings: the command and each given
/// option but the per-rank ones: outputs and checkpoint folders, device, memory_budget, threads,
/// workers, prefetch, quiet, sample_hz, dist_timeout; an input path as the kind of data or the
/// model file's name, since a path may differ between machines).
void check_command(const std::string& command, const std::vector<OptionValue>& values);

/// Before any work: no output replaces an input or another output (check_path_plan), each
/// output can be written (check_output_path, "-" is stdout) and a `checkpoint_dir` can hold
/// checkpoints (check_checkpoint_dir). UsageError naming the option.
void check_run_paths(const std::vector<PathUse>& uses);

}  // namespace saturate

// The flags that say which training step is run, declared once for probe, search, memory and
// train: --precision and --checkpointing (search also takes --checkpointing auto).
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/probe/workload_trial_step.h"

namespace saturate::cli {

struct StepFlags {
  std::string precision = "fp32";
  std::string checkpointing = "none";
  /// --fast-paths: none | a list (step/fast_paths.h); search also auto (try on CUDA) and try.
  std::string fast_paths = "none";
  bool allow_auto = false;  ///< --checkpointing auto, --fast-paths auto|try (search)
};
/// `allow_auto`: --checkpointing auto (search: compare none with blocks).
void add_step_flags(CLI::App& app, StepFlags& f, bool allow_auto = false);
/// --checkpointing as a policy; "auto" gives none (the caller compares).
CheckpointPolicy step_checkpointing(const StepFlags& f);
/// The footprint of a plain step with these flags (no accumulation, no resident data); with
/// --fast-paths auto or try, no switches (the search tries them after finding the batch).
TrainingFootprint step_footprint(const StepFlags& f);
/// --fast-paths auto (on CUDA) or try: the search tries the switches at the batch it found.
bool fast_paths_tried(const StepFlags& f, bool cuda);

}  // namespace saturate::cli

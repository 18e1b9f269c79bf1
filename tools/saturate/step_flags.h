// The flags that say which training step is run, declared once for probe, search, memory and
// train: --precision and --checkpointing (search also takes --checkpointing auto).
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "saturate/probe/workload_trial_step.h"

namespace saturate::cli {

struct StepFlags {
  std::string precision = "fp32";
  std::string checkpointing = "none";
  bool allow_auto = false;  ///< --checkpointing auto (search)
};
/// `allow_auto`: --checkpointing auto (search: compare none with blocks).
void add_step_flags(CLI::App& app, StepFlags& f, bool allow_auto = false);
/// --checkpointing as a policy; "auto" gives none (the caller compares).
CheckpointPolicy step_checkpointing(const StepFlags& f);
/// The footprint of a plain step with these flags (no accumulation, no resident data).
TrainingFootprint step_footprint(const StepFlags& f);

}  // namespace saturate::cli

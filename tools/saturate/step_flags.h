// The flags that say which training step is run, declared once for probe, search, memory and
// train: --precision, --checkpointing and --fast-paths into the library's StepSettings
// (session/run_options.h); a search also takes --checkpointing auto and --fast-paths auto|try.
#pragma once
#include <CLI/CLI.hpp>

#include "saturate/session/run_options.h"

namespace saturate::cli {

void add_step_flags(CLI::App& app, StepSettings& f, bool search = false);

}  // namespace saturate::cli

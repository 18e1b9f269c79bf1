// The input-pipeline flags on probe, search and train (--data, --workers, --prefetch, --drop-last,
// --skip-bad-samples, --no-augment, --val-fraction) into the library's DataOptions
// (session/data_session.h).
#pragma once
#include <memory>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/session/data_session.h"

namespace saturate::cli {

/// The defaults --help shows are `f`'s values: a command sets its own before calling this.
void add_data_flags(CLI::App& app, DataOptions& f);

}  // namespace saturate::cli

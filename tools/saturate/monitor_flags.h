// The monitor's flags on probe, search and train (--sample-hz, --trace, --no-monitor) into the
// library's MonitorSettings (session/run_options.h).
#pragma once
#include <CLI/CLI.hpp>

#include "saturate/session/run_options.h"

namespace saturate::cli {

void add_monitor_flags(CLI::App& app, MonitorSettings& f);

}  // namespace saturate::cli

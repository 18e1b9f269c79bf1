// The monitor's flags on probe/search/train (--sample-hz, --trace, --no-monitor) and attaching it.
#pragma once
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "saturate/monitor/monitor_observer.h"
#include "saturate/monitor/train_monitor.h"
#include "saturate/probe/probe.h"

namespace saturate::cli {

struct MonitorFlags {
  double sample_hz = 10;
  std::string trace;
  bool off = false;
};
void add_monitor_flags(CLI::App& app, MonitorFlags& f);

/// The observer for `probe` (nullptr with --no-monitor); warns on stderr when a CUDA run
/// has no NVML. Call finish() on it after the run (writes the trace).
std::unique_ptr<MonitorObserver> attach_monitor(const MonitorFlags& f, Probe& probe, const c10::Device& device);

/// The monitor's options from the flags, after checking them; nothing with --no-monitor.
std::optional<MonitorOptions> monitor_options(const MonitorFlags& f, const c10::Device& device);


}  // namespace saturate::cli

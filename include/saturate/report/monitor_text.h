// Implements: the monitor printers for people: the live lines (like `nvidia-smi dmon`), a
// utilization summary and a trial's bottleneck verdict.
#pragma once
#include <string>

#include "saturate/monitor/sampler.h"
#include "saturate/probe/trial.h"

namespace saturate {

/// The live lines' column header, the columns depending on the sampler's source ("nvml" or "proc").
std::string live_header(const std::string& source);
/// One sample under live_header's columns ("-" for a value the source cannot give).
std::string live_line(const Sample& s, const std::string& source);

/// A few lines for people from a utilization summary (summarize_utilization).
std::string summary_text(const Utilization& summary);
/// "bottleneck <verdict>: <reason>" and "fix ..." lines ("" without a verdict).
std::string bottleneck_text(const Trial& t);

}  // namespace saturate

// Implements: the monitor printers for people: a utilization summary and a trial's bottleneck verdict.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "saturate/probe/trial.h"

namespace saturate {

/// A few lines for people from a utilization summary (summarize_samples).
std::string summary_text(const nlohmann::json& summary);
/// "bottleneck <verdict>: <reason>" and "fix ..." lines ("" without a verdict).
std::string bottleneck_text(const Trial& t);

}  // namespace saturate

// Implements: which allocation sites a leak comes from. Over a window of steps recorded in the
// CPU allocator's event log with allocation sites (memory/allocation_sites.h), the allocations
// made in a step and still alive at the end of the window (the window's last step excepted: its
// gradients and outputs may rightly live on into the next step) are what the steps leave behind;
// grouped by site, per step. No LibTorch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/cpu_budget_allocator.h"

namespace saturate {

struct LeakSite {
  std::string site;                 ///< "aten::linear > aten::addmm"; "(unknown)" without tracking
  double bytes_per_step = 0;        ///< bytes left alive per step
  double allocations_per_step = 0;
};

/// `step_end_events[k]`: the number of events in the log when step k of the window ended (the
/// log started at the window's first step). Sites sorted by bytes, largest first, at most `top`.
std::vector<LeakSite> leaked_sites(const CpuEventLog& log, const std::vector<size_t>& step_end_events, size_t top = 8);

/// [{"site", "bytes_per_step", "allocations_per_step"}, ...]
nlohmann::json leak_sites_json(const std::vector<LeakSite>& sites);

}  // namespace saturate

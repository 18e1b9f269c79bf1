#include "saturate/memory/leak_sites.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace saturate {

std::vector<LeakSite> leaked_sites(const CpuEventLog& log, const std::vector<size_t>& step_end_events, size_t top) {
  if (step_end_events.size() < 2) return {};
  struct Live {
    int64_t bytes;
    const char* site;
    size_t step;
  };
  std::unordered_map<uintptr_t, Live> live;
  size_t step = 0;
  const size_t end = std::min(log.events.size(), step_end_events.back());
  for (size_t i = 0; i < end; ++i) {
    while (step + 1 < step_end_events.size() && i >= step_end_events[step]) ++step;
    const CpuAllocationEvent& e = log.events[i];
    if (e.kind == CpuAllocationEvent::kAlloc) {
      live[e.address] = {e.bytes, e.site, step};
    } else if (e.kind == CpuAllocationEvent::kFree) {
      live.erase(e.address);  // memory from before the window is not in the map
    }
  }
  const size_t counted_steps = step_end_events.size() - 1;  // the last step's allocations may live on
  std::map<std::string, LeakSite> by_site;
  for (const auto& [address, l] : live) {
    if (l.step >= counted_steps) continue;
    const std::string name = l.site ? l.site : "(unknown)";
    LeakSite& s = by_site[name];
    s.site = name;
    s.bytes_per_step += static_cast<double>(l.bytes);
    s.allocations_per_step += 1;
  }
  std::vector<LeakSite> out;
  for (auto& [name, s] : by_site) {
    s.bytes_per_step /= static_cast<double>(counted_steps);
    s.allocations_per_step /= static_cast<double>(counted_steps);
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const LeakSite& a, const LeakSite& b) {
    return a.bytes_per_step != b.bytes_per_step ? a.bytes_per_step > b.bytes_per_step : a.site < b.site;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

nlohmann::json leak_sites_json(const std::vector<LeakSite>& sites) {
  nlohmann::json j = nlohmann::json::array();
  for (const LeakSite& s : sites)
    j.push_back({{"site", s.site}, {"bytes_per_step", s.bytes_per_step}, {"allocations_per_step", s.allocations_per_step}});
  return j;
}

}  // namespace saturate

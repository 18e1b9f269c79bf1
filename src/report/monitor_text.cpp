#include "saturate/report/monitor_text.h"

#include <fmt/format.h>

#include "saturate/monitor/sampler.h"

namespace saturate {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

std::string summary_text(const nlohmann::json& summary) {
  std::string out = fmt::format("source {}, {} samples at {} Hz\n", summary.value("source", "?"),
                                summary.value("samples", 0), summary.value("sample_hz", 0.0));
  for (const SampleField& f : sample_fields()) {
    if (!summary.contains(f.name)) continue;
    const auto& v = summary[f.name];
    const std::string name = f.name;
    const bool bytes = name.size() > 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
    const double scale = bytes ? kMiB : 1.0;
    const std::string shown = bytes ? name.substr(0, name.size() - 6) + "_MiB" : name;
    out += fmt::format("  {:<22} mean {:>10.1f}  min {:>10.1f}  max {:>10.1f}\n", shown,
                       v["mean"].get<double>() / scale, v["min"].get<double>() / scale, v["max"].get<double>() / scale);
  }
  return out;
}

std::string bottleneck_text(const Trial& t) {
  if (!t.findings.bottleneck) return "";
  const BottleneckFinding& b = *t.findings.bottleneck;
  return fmt::format("bottleneck {}: {}\nfix        {}\n", b.verdict, b.reason, b.fix);
}

}  // namespace saturate

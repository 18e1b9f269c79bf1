#include "saturate/report/monitor_text.h"

#include <cmath>

#include <fmt/format.h>

#include "saturate/monitor/sampler.h"

namespace saturate {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;

std::string cell(double v, const char* fmt_spec, int width) {
  if (std::isnan(v)) return fmt::format("{:>{}}", "-", width);
  return fmt::format(fmt::runtime(fmt_spec), v, width);
}
}  // namespace

std::string live_header(const std::string& source) {
  if (source == "nvml")
    return "#   time_s   gpu%   mem%   used_MiB  total_MiB  power_W  sm_MHz  temp_C  proc_MiB   cpu%    rss_MiB";
  return "#   time_s     cpu%    rss_MiB";
}

std::string live_line(const Sample& s, const std::string& source) {
  const std::string head = fmt::format("{:>10.1f}", s.time_s);
  if (source == "nvml")
    return head + " " + cell(s.gpu_util_percent, "{:>{}.0f}", 6) + " " + cell(s.mem_util_percent, "{:>{}.0f}", 6) +
           " " + cell(s.mem_used_bytes / kMiB, "{:>{}.0f}", 10) + " " + cell(s.mem_total_bytes / kMiB, "{:>{}.0f}", 10) +
           " " + cell(s.power_w, "{:>{}.1f}", 8) + " " + cell(s.sm_clock_mhz, "{:>{}.0f}", 7) + " " +
           cell(s.temperature_c, "{:>{}.0f}", 7) + " " + cell(s.process_gpu_mem_bytes / kMiB, "{:>{}.0f}", 9) + " " +
           cell(s.cpu_percent, "{:>{}.1f}", 6) + " " + cell(s.rss_bytes / kMiB, "{:>{}.1f}", 10);
  return head + " " + cell(s.cpu_percent, "{:>{}.1f}", 8) + " " + cell(s.rss_bytes / kMiB, "{:>{}.1f}", 10);
}

std::string summary_text(const Utilization& summary) {
  std::string out = fmt::format("source {}, {} samples at {} Hz\n", summary.source.empty() ? "?" : summary.source,
                                summary.samples, summary.sample_hz);
  for (const SampleField& f : sample_fields()) {
    const UtilizationStat* v = summary.field(f.name);
    if (!v) continue;
    const std::string name = f.name;
    const bool bytes = name.size() > 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
    const double scale = bytes ? kMiB : 1.0;
    const std::string shown = bytes ? name.substr(0, name.size() - 6) + "_MiB" : name;
    out += fmt::format("  {:<22} mean {:>10.1f}  min {:>10.1f}  max {:>10.1f}\n", shown,
                       v->mean / scale, v->min / scale, v->max / scale);
  }
  return out;
}

std::string bottleneck_text(const Trial& t) {
  if (!t.findings.bottleneck) return "";
  const BottleneckFinding& b = *t.findings.bottleneck;
  return fmt::format("bottleneck {}: {}\nfix        {}\n", b.verdict, b.reason, b.fix);
}

}  // namespace saturate

// The monitor's printers for people: the live lines under their header, the utilization summary.
#include "saturate/report/monitor_text.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "saturate/monitor/sampler.h"

namespace saturate {
namespace {

TEST(MonitorTextTest, LiveLinesHaveTheHeadersColumns) {
  SamplerOptions o;
  o.sample_hz = 0;
  o.use_nvml = false;
  Sampler sampler(o);
  sampler.sample_now();
  const Sample s = sampler.sample_now();
  EXPECT_NE(live_header("proc").find("cpu%"), std::string::npos);
  EXPECT_NE(live_header("nvml").find("gpu%"), std::string::npos);
  const std::string line = live_line(s, "proc");
  EXPECT_EQ(line.size(), live_header("proc").size()) << line;
  const std::string text = summary_text(summarize_utilization(sampler.samples(), "proc", 10, SteadyClock::time_point::min(),
                                                                SteadyClock::time_point::max()));
  EXPECT_NE(text.find("rss_MiB"), std::string::npos) << text;
}

TEST(MonitorTextTest, AnNvmlLineShowsAMissingValueAsADash) {
  Sample s;
  s.time_s = 1.26;
  s.gpu_util_percent = 97;
  s.mem_used_bytes = 2048.0 * 1024 * 1024;
  s.power_w = std::numeric_limits<double>::quiet_NaN();
  const std::string line = live_line(s, "nvml");
  EXPECT_EQ(line.size(), live_header("nvml").size()) << line;
  EXPECT_EQ(line.rfind("       1.3     97 ", 0), 0u) << line;
  EXPECT_NE(line.find("      2048 "), std::string::npos) << line;
  EXPECT_NE(line.find("        - "), std::string::npos) << line;  // power_W
}

}  // namespace
}  // namespace saturate

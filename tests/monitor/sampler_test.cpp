// The sampler's /proc source, its background thread, summaries and printers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "saturate/monitor/proc_stats.h"
#include "saturate/monitor/sampler.h"
#include "support/support.h"

namespace saturate {
namespace {

SamplerOptions proc_only(double hz) {
  SamplerOptions o;
  o.sample_hz = hz;
  o.use_nvml = false;
  return o;
}

void spin_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

TEST(SamplerTest, ProcReadsThisProcessesCpuTimeAndResidentMemory) {
  const ProcUsage u = read_proc_usage(static_cast<int>(getpid()), false);
  EXPECT_TRUE(u.alive);
  EXPECT_GT(u.rss_bytes, 1 << 20);
  EXPECT_GT(u.cpu_time_s, 0);
  EXPECT_FALSE(read_proc_usage(2147483, false).alive);
}

TEST(SamplerTest, BackgroundThreadSamplesAtTheRequestedRate) {
  Sampler sampler(proc_only(50));
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  sampler.stop();
  const size_t n = sampler.samples().size();
  // 20 expected; generous bounds for a loaded machine
  EXPECT_GE(n, 5u);
  EXPECT_LE(n, 25u);
  const auto s = sampler.samples();
  for (size_t i = 1; i < s.size(); ++i) EXPECT_GE(s[i].time_s, s[i - 1].time_s);
}

TEST(SamplerTest, ZeroHzSamplesOnlyWhenAsked) {
  Sampler sampler(proc_only(0));
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(sampler.samples().empty());
  sampler.sample_now();
  EXPECT_EQ(sampler.samples().size(), 1u);
}

TEST(SamplerTest, CpuPercentSeesABusyLoopAndAnIdleWait) {
  Sampler sampler(proc_only(0));
  const auto t0 = sampler.sample_now().at;
  spin_for(std::chrono::milliseconds(300));
  const auto t1 = sampler.sample_now().at;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t2 = sampler.sample_now().at;
  const auto busy = summarize_samples(sampler.samples(), "proc", 0, t0, t1);
  const auto idle = summarize_samples(sampler.samples(), "proc", 0, t1, t2);
  // one spinning thread is 100 %; a loaded machine gives it less, never nothing
  EXPECT_GT(busy["cpu_percent"]["mean"].get<double>(), 20);
  EXPECT_LT(idle["cpu_percent"]["mean"].get<double>(), 20);
  EXPECT_LE(busy["cpu_percent"]["min"].get<double>(), busy["cpu_percent"]["max"].get<double>());
}

TEST(SamplerTest, SummaryKeepsOnlySamplesInsideTheWindow) {
  Sampler sampler(proc_only(0));
  sampler.sample_now();
  const auto from = std::chrono::steady_clock::now();
  sampler.sample_now();
  sampler.sample_now();
  const auto to = std::chrono::steady_clock::now();
  sampler.sample_now();
  EXPECT_EQ(summarize_samples(sampler.samples(), "proc", 10, from, to)["samples"], 2);
  EXPECT_EQ(summarize_samples(sampler.samples(), "proc", 10)["samples"], 4);
}

TEST(SamplerTest, OnSampleSeesEverySample) {
  SamplerOptions o = proc_only(0);
  int seen = 0;
  o.on_sample = [&](const Sample&) { ++seen; };
  Sampler sampler(o);
  sampler.sample_now();
  sampler.sample_now();
  EXPECT_EQ(seen, 2);
  EXPECT_GE(sampler.own_cpu_s(), 0);
}

TEST(SamplerTest, CsvRowsHaveOneCellPerHeaderColumn) {
  Sampler sampler(proc_only(0));
  const Sample s = sampler.sample_now();
  const std::string header = csv_header(), row = csv_row(s, "proc");
  EXPECT_EQ(header.rfind("time_s,source,gpu_util_percent", 0), 0u) << header;
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ','));
  EXPECT_NE(row.find(",proc,,"), std::string::npos) << row;  // NaN GPU values are empty cells
}

TEST(SamplerTest, ProcessTreeFindsAChildProcess) {
  std::string out;
  // a background child of a shell that waits for it: the shell's tree holds both
  const auto tree_of_self = process_tree(static_cast<int>(getpid()));
  EXPECT_EQ(tree_of_self.front(), static_cast<int>(getpid()));
  EXPECT_EQ(saturate::testing::run_command("sh -c 'sleep 0.3 & sleep 0.05; exit 0'", &out), 0);
}

}  // namespace
}  // namespace saturate

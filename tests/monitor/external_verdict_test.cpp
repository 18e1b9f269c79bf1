// The verdict on a job watched from outside (saturate monitor -- CMD): from its CPU time against
// the cores and the GPU's busy share alone, and always saying what cannot be seen from outside.
#include "monitor/external_verdict.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

Utilization watched(double cpu_percent_mean, double gpu_percent_mean = -1, int64_t samples = 20) {
  Utilization u;
  u.source = gpu_percent_mean >= 0 ? "nvml" : "proc";
  u.samples = samples;
  u.sample_hz = 10;
  u.fields.push_back({"cpu_percent", {cpu_percent_mean, 0, 2 * cpu_percent_mean}});
  if (gpu_percent_mean >= 0) u.fields.push_back({"gpu_util_percent", {gpu_percent_mean, 0, 100}});
  return u;
}

TEST(ExternalVerdict, NamesWhatIsSaturatedFromTheCpuAndGpuShares) {
  EXPECT_EQ(external_job_verdict(watched(100, 95), 8).verdict, "gpu-bound");
  EXPECT_EQ(external_job_verdict(watched(790), 8).verdict, "cpu-bound");  // every core of 8
  EXPECT_EQ(external_job_verdict(watched(99, 30), 8).verdict, "one-thread-bound");  // the GPU waits on one core
  EXPECT_EQ(external_job_verdict(watched(98), 2).verdict, "one-thread-bound");
  EXPECT_EQ(external_job_verdict(watched(3, 2), 8).verdict, "waiting");
  EXPECT_EQ(external_job_verdict(watched(2), 2).verdict, "waiting");
  EXPECT_EQ(external_job_verdict(watched(60), 4).verdict, "partly-busy");
  // one core is every core of a one-core machine: the processor, not one thread, is the limit
  EXPECT_EQ(external_job_verdict(watched(99), 1).verdict, "cpu-bound");
}

TEST(ExternalVerdict, SaysWhatItCannotSeeAndNeedsSamples) {
  const BottleneckFinding b = external_job_verdict(watched(98), 2);
  EXPECT_NE(b.reason.find("98 % of one core"), std::string::npos) << b.reason;
  EXPECT_NE(b.reason.find("phases (data wait, forward, backward, optimizer) cannot be seen"), std::string::npos)
      << b.reason;
  EXPECT_NE(b.reason.find("saturate.monitor()"), std::string::npos) << b.reason;
  EXPECT_FALSE(b.fix.empty());
  EXPECT_EQ(b.evidence["cores"], 2);
  EXPECT_EQ(external_job_verdict(watched(98, -1, 1), 2).verdict, "not-measured");
}

}  // namespace
}  // namespace saturate

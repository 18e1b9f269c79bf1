// The verdict rules on fixed step profiles (the thresholds of docs/monitor.md).
#include "saturate/monitor/bottleneck.h"

#include <algorithm>

#include "saturate/core/errors.h"
#include "support/support.h"

namespace saturate {
namespace {

StepProfile cpu_profile(double data, double fwd, double bwd, double opt, double launch) {
  StepProfile p;
  p.data_wait_ms = data;
  p.forward_ms = fwd;
  p.backward_ms = bwd;
  p.optimizer_ms = opt;
  p.step_ms = data + fwd + bwd + opt;
  p.launch_fraction = launch;
  return p;
}

TEST(BottleneckTest, WaitingForDataMostOfTheStepIsDataBound) {
  const Verdict v = classify_bottleneck(cpu_profile(40, 5, 4, 1, 0.9));
  EXPECT_EQ(v.kind, Bottleneck::kData);
  EXPECT_NEAR(v.evidence["data_share"].get<double>(), 0.8, 1e-9);
  EXPECT_NE(v.fix.find("workers"), std::string::npos);
  EXPECT_NE(v.reason.find("80 %"), std::string::npos) << v.reason;
}

TEST(BottleneckTest, HostToDeviceCopiesCountAsWaitingForData) {
  StepProfile p = cpu_profile(0, 5, 4, 1, 0.0);
  p.h2d_ms = 10;
  p.step_ms = 20;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kData);
}

TEST(BottleneckTest, LaunchOverheadOverHalfTheComputeIsLaunchBound) {
  const Verdict v = classify_bottleneck(cpu_profile(0, 1, 1, 1, 0.8));
  EXPECT_EQ(v.kind, Bottleneck::kLaunch);
  EXPECT_NE(v.fix.find("larger batch"), std::string::npos);
}

TEST(BottleneckTest, ArithmeticFillingTheStepIsComputeBound) {
  EXPECT_EQ(classify_bottleneck(cpu_profile(0.5, 30, 60, 5, 0.02)).kind, Bottleneck::kCompute);
}

TEST(BottleneckTest, NoSingleCauseIsBalanced) {
  // 20 % data, 35 % of compute is launch, arithmetic 39 %: each clearly under its threshold
  StepProfile p = cpu_profile(20, 30, 25, 5, 0.35);
  p.step_ms = 100;  // 20 ms outside the phases
  const Verdict v = classify_bottleneck(p);
  EXPECT_EQ(v.kind, Bottleneck::kBalanced) << v.reason;
  EXPECT_NEAR(v.evidence["shares"]["other"].get<double>(), 0.2, 1e-9);
}

TEST(BottleneckTest, AllreduceOverThresholdIsCommunicationBound) {
  StepProfile p = cpu_profile(0, 10, 20, 2, 0.0);
  p.allreduce_ms = 40;
  p.step_ms = 72;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kCommunication);
}

TEST(BottleneckTest, TheLargestStallOverItsThresholdWinsWhenItClearlyLeads) {
  StepProfile p = cpu_profile(38, 5, 5, 2, 0.0);
  p.allreduce_ms = 50;
  p.step_ms = 100;
  const Verdict v = classify_bottleneck(p);
  EXPECT_EQ(v.kind, Bottleneck::kCommunication) << v.reason;
  EXPECT_TRUE(v.between.empty());
}

TEST(BottleneckTest, TwoStallsOfAboutTheSameShareAreBorderlineBetweenThem) {
  StepProfile p = cpu_profile(35, 10, 10, 5, 0.0);
  p.allreduce_ms = 40;
  p.step_ms = 100;
  const Verdict v = classify_bottleneck(p);
  EXPECT_EQ(v.kind, Bottleneck::kBorderline) << v.reason;
  EXPECT_EQ(v.between, (std::vector<Bottleneck>{Bottleneck::kCommunication, Bottleneck::kData}));
  EXPECT_NE(v.fix.find("workers"), std::string::npos) << v.fix;  // the data fix
  EXPECT_NE(v.fix.find("all-reduce"), std::string::npos) << v.fix;  // the communication fix
  const nlohmann::json j = to_json(bottleneck_finding(v));
  EXPECT_EQ(j["verdict"], "borderline");
  EXPECT_EQ(j["between"], nlohmann::json({"communication-bound", "data-bound"}));
  EXPECT_NEAR(j["evidence"]["shares"]["data"].get<double>(), 0.35, 1e-9);
  EXPECT_NEAR(j["evidence"]["shares"]["communication"].get<double>(), 0.40, 1e-9);
  EXPECT_NE(v.reason.find("35 %"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("40 %"), std::string::npos) << v.reason;
}

TEST(BottleneckTest, ADataShareNearItsThresholdIsBorderlineAndOneClearOfItIsNot) {
  // data against arithmetic, no launch overhead: the data share swept across its 30 % threshold
  const auto at = [](double data_share) {
    StepProfile p = cpu_profile(100 * data_share, 100 * (1 - data_share), 0, 0, 0.0);
    return classify_bottleneck(p);
  };
  EXPECT_EQ(at(0.18).kind, Bottleneck::kCompute);
  for (double d : {0.25, 0.30, 0.36}) {
    const Verdict v = at(d);
    EXPECT_EQ(v.kind, Bottleneck::kBorderline) << d << ": " << v.reason;
    ASSERT_FALSE(v.between.empty());
    EXPECT_EQ(v.between.front(), Bottleneck::kData) << d;
    EXPECT_NE(std::find(v.between.begin(), v.between.end(), Bottleneck::kCompute), v.between.end()) << d;
  }
  EXPECT_EQ(at(0.40).kind, Bottleneck::kData);
}

TEST(BottleneckTest, AFactorOfOneGivesTheCrispThresholds) {
  BottleneckThresholds crisp;
  crisp.borderline_factor = 1.0;
  EXPECT_EQ(classify_bottleneck(cpu_profile(30, 70, 0, 0, 0.0), crisp).kind, Bottleneck::kData);
  EXPECT_EQ(classify_bottleneck(cpu_profile(29, 71, 0, 0, 0.0), crisp).kind, Bottleneck::kCompute);
}

TEST(BottleneckTest, BusyGpuWithBusyMemoryIsMemoryBoundElseComputeBound) {
  StepProfile p = cpu_profile(0, 10, 20, 2, 0.1);
  p.on_gpu = true;
  p.gpu_util_percent = 97;
  p.mem_util_percent = 75;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kMemory);
  p.mem_util_percent = 30;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kCompute);
  p.gpu_util_percent = 40;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kBalanced);
}

TEST(BottleneckTest, GpuLaunchThresholdIsHigherThanTheCpus) {
  StepProfile p = cpu_profile(0, 10, 20, 2, 0.6);
  p.on_gpu = true;
  p.gpu_util_percent = 50;
  EXPECT_NE(classify_bottleneck(p).kind, Bottleneck::kLaunch);
  p.launch_fraction = 0.95;
  EXPECT_EQ(classify_bottleneck(p).kind, Bottleneck::kLaunch);
  EXPECT_NE(classify_bottleneck(p).fix.find("CUDA graphs"), std::string::npos);
}

TEST(BottleneckTest, UnmeasuredLaunchFractionIsNull) {
  const Verdict v = classify_bottleneck(cpu_profile(0, 10, 10, 1, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(v.evidence["launch_fraction"].is_null());
  EXPECT_EQ(v.kind, Bottleneck::kCompute);
}

TEST(BottleneckTest, EveryVerdictPrintsParsesBackAndHasAFix) {
  for (Bottleneck b : {Bottleneck::kData, Bottleneck::kLaunch, Bottleneck::kCompute, Bottleneck::kMemory,
                       Bottleneck::kCommunication, Bottleneck::kBalanced, Bottleneck::kBorderline}) {
    EXPECT_EQ(parse_bottleneck(to_string(b)), b);
    EXPECT_FALSE(bottleneck_fix(b, false).empty());
    EXPECT_FALSE(bottleneck_fix(b, true).empty());
  }
  ASSERT_THROWS_WITH(parse_bottleneck("io-bound"), UsageError, "expected data-bound, launch-bound");
}

// issue 27: a step already in bf16 was told to use "mixed precision (bf16)"
TEST(BottleneckTest, AStepAlreadyInMixedPrecisionIsNotToldToUseIt) {
  StepProfile p = cpu_profile(0.5, 30, 60, 5, 0.02);
  Verdict fp32 = classify_bottleneck(p);
  ASSERT_EQ(fp32.kind, Bottleneck::kCompute);
  EXPECT_NE(fp32.fix.find("mixed precision (bf16)"), std::string::npos) << fp32.fix;
  p.mixed_precision = true;
  const Verdict bf16 = classify_bottleneck(p);
  ASSERT_EQ(bf16.kind, Bottleneck::kCompute);
  EXPECT_EQ(bf16.fix.find("mixed precision ("), std::string::npos) << bf16.fix;
  EXPECT_NE(bf16.fix.find("already in mixed precision"), std::string::npos) << bf16.fix;
  for (bool gpu : {false, true})
    for (Bottleneck b : {Bottleneck::kCompute, Bottleneck::kMemory})
      EXPECT_EQ(bottleneck_fix(b, gpu, true).find("mixed precision ("), std::string::npos) << bottleneck_fix(b, gpu, true);
}

TEST(BottleneckTest, JsonHasVerdictEvidenceAndFix) {
  const nlohmann::json j = to_json(bottleneck_finding(classify_bottleneck(cpu_profile(40, 5, 4, 1, 0.9))));
  EXPECT_EQ(j["verdict"], "data-bound");
  EXPECT_TRUE(j["evidence"].is_object());
  EXPECT_TRUE(j["fix"].is_string());
  EXPECT_TRUE(j["reason"].is_string());
}

}  // namespace
}  // namespace saturate

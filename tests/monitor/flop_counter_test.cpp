// FLOPs: the counter reads real operator shapes (forward and the autograd engine's backward);
// the built-in models' analytic figures come from their architecture. Both are checked against
// sums written out by hand from the layer lists below, and against each other.
#include "saturate/monitor/flop_counter.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "models/flops.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/probe/probe.h"
#include "saturate/step/training_step.h"
#include "support/support.h"
#include "support/trial_findings.h"

using namespace saturate;

namespace {

/// FLOPs of one training step at `batch` of a built-in model, counted from its operators.
double counted_training_flops(const ModelSpec& spec, int64_t batch) {
  Workload w(build_model(resolve_model_spec(spec)), torch::kCPU, OptimizerKind::kSgd);
  TrainingStep step(w, {});
  const Batch b = w.synthetic_batch(batch);
  FlopCounter counter;
  (void)step.run(b);
  return counter.total_flops();
}

/// The same, under a step of the given precision (autocast for bf16).
double counted_training_flops(const ModelSpec& spec, int64_t batch, Precision precision) {
  Workload w(build_model(resolve_model_spec(spec)), torch::kCPU, OptimizerKind::kSgd);
  StepOptions o;
  o.precision = precision;
  TrainingStep step(w, o);
  const Batch b = w.synthetic_batch(batch);
  FlopCounter counter;
  (void)step.run(b);
  return counter.total_flops();
}

double forward_flops(const ModelSpec& spec, int64_t batch) {
  Workload w(build_model(resolve_model_spec(spec)), torch::kCPU, OptimizerKind::kSgd);
  const Batch b = w.synthetic_batch(batch);
  torch::NoGradGuard no_grad;
  FlopCounter counter;
  (void)w.model().forward(b.inputs);
  return counter.total_flops();
}

ModelSpec spec_of(const std::string& name) {
  ModelSpec s;
  s.name = name;
  return s;
}

}  // namespace

TEST(FlopCounterTest, AMatrixProductCountsTwoFlopsPerMultiplyAdd) {
  const auto a = torch::randn({3, 4}), b = torch::randn({4, 5});
  FlopCounter counter;
  (void)torch::mm(a, b);
  (void)torch::addmm(torch::zeros({3, 5}), a, b);
  (void)torch::bmm(torch::randn({2, 3, 4}), torch::randn({2, 4, 5}));
  EXPECT_DOUBLE_EQ(counter.total_flops(), 2.0 * 3 * 4 * 5 * (1 + 1 + 2));
  EXPECT_DOUBLE_EQ(counter.flops_by_operator().at("aten::bmm"), 2.0 * 2 * 3 * 4 * 5);
}

TEST(FlopCounterTest, ElementwiseWorkAndOperatorsOutsideTheCounterAreNotCounted) {
  const auto a = torch::randn({64, 64});
  (void)torch::mm(a, a);  // before the counter
  FlopCounter counter;
  (void)(a * a + a).relu().sum();
  EXPECT_EQ(counter.total_flops(), 0);
}

TEST(FlopCounterTest, ASecondCounterWhileOneCountsIsRefused) {
  FlopCounter first;
  ASSERT_THROWS_WITH(FlopCounter second, RuntimeFailure, "already counting");
}

TEST(FlopCounterTest, ConvolutionForwardCountsOutputElementsTimesKernelAndInputChannels) {
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).stride(2).padding(1));
  const auto x = torch::randn({2, 3, 17, 17});
  torch::NoGradGuard no_grad;
  FlopCounter counter;
  (void)conv->forward(x);
  // output 2 x 8 x 9 x 9, each element 3 x 3 x 3 multiply-adds
  EXPECT_DOUBLE_EQ(counter.total_flops(), 2.0 * (2 * 8 * 9 * 9) * (3 * 3 * 3));
}

// mlp 1x28x28 -> 1024 -> 1024 -> 1024 -> 10 (the default: 3 hidden layers of width 1024).
// Forward: 2 x (784x1024 + 1024x1024 + 1024x1024 + 1024x10) per sample. Backward: the weight
// gradient of every layer (one product each) and the input gradient of every layer but the
// first (its input is the data).
TEST(FlopCounterTest, ATrainingStepOfTheMlpCountsWhatTheLayersComputeByHand) {
  const double l1 = 784.0 * 1024, l2 = 1024.0 * 1024, l3 = 1024.0 * 1024, head = 1024.0 * 10;
  const double forward = 2 * (l1 + l2 + l3 + head);
  const double backward = 2 * (l1 + l2 + l3 + head) + 2 * (l2 + l3 + head);
  EXPECT_DOUBLE_EQ(counted_training_flops(spec_of("mlp"), 8), 8 * (forward + backward));
  EXPECT_DOUBLE_EQ(forward_flops(spec_of("mlp"), 8), 8 * forward);
}

// convnet on 1x28x28: conv 1->32 at 28x28, conv 32->64 at 28x28, max pool -> 14x14, conv
// 64->128 at 14x14 (3x3 kernels), then the classifier 128*4*4 -> 10.
TEST(FlopCounterTest, ATrainingStepOfTheConvnetCountsWhatTheLayersComputeByHand) {
  const double c1 = 28.0 * 28 * 32 * 1 * 9, c2 = 28.0 * 28 * 64 * 32 * 9, c3 = 14.0 * 14 * 128 * 64 * 9,
               head = 2048.0 * 10;
  const double forward = 2 * (c1 + c2 + c3 + head);
  const double backward = 2 * (c1 + c2 + c3 + head) + 2 * (c2 + c3 + head);  // no input gradient for c1
  EXPECT_DOUBLE_EQ(counted_training_flops(spec_of("convnet"), 4), 4 * (forward + backward));
}

namespace {

// gpt with 2 blocks, width 64, 4 heads, 16 tokens, vocabulary 100 (its multiply-adds a sample and
// block below).
ModelSpec small_gpt() {
  ModelSpec s = spec_of("gpt");
  s.layers = 2;
  s.width = 64;
  s.heads = 4;
  s.seq_len = 16;
  s.vocab = 100;
  return s;
}
constexpr double kSmallGptFlopsPerBlock = 16.0 * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64) + 2 * (16.0 * 16 * 64);

/// A zoo model small enough for a CPU step (resnets at 64x64, gpt at 32 tokens).
ModelSpec small_zoo_spec(const std::string& name) {
  ModelSpec s = spec_of(name);
  if (name.rfind("resnet", 0) == 0) {
    s.input_shape = {3, 64, 64};  // small enough for a CPU; odd sizes come out of the strides
    s.classes = 10;
  }
  if (name == "gpt") s.seq_len = 32;
  return s;
}

}  // namespace

// gpt with 2 blocks, width 64, 4 heads, 16 tokens, vocabulary 100. Per token and block: qkv
// 64x192, proj 64x64, fc 64x256, out 256x64; attention per sample and block: q k^T and the
// weighted sum of v over the 16x16 square, 16x16x64 multiply-adds each; head 64x100 per token.
// Every product's input descends from the embeddings, so each backward computes both gradients.
TEST(FlopCounterTest, ATrainingStepOfTheGptCountsWhatTheLayersComputeByHand) {
  const ModelSpec s = small_gpt();
  const double per_block = kSmallGptFlopsPerBlock;
  const double forward = 2 * (2 * per_block + 16.0 * 64 * 100);
  EXPECT_DOUBLE_EQ(counted_training_flops(s, 3), 3 * 3 * forward);
}

// Checkpointed blocks run their forward again in the backward: the model's FLOPs stay the step's
// (MFU), the recomputation is counted apart (HFU), here exactly the blocks' forward.
TEST(FlopCounterTest, ACheckpointedStepCountsTheModelsFlopsOnceAndTheRecomputationApart) {
  const ModelSpec s = small_gpt();
  const double per_block = kSmallGptFlopsPerBlock;
  const double forward = 2 * (2 * per_block + 16.0 * 64 * 100);
  Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kSgd);
  StepOptions o;
  o.checkpointing = CheckpointPolicy{1};
  TrainingStep step(w, o);
  const Batch b = w.synthetic_batch(3);
  FlopCounter counter;
  (void)step.run(b);
  EXPECT_DOUBLE_EQ(counter.total_flops(), 3 * 3 * forward);
  EXPECT_DOUBLE_EQ(counter.recompute_flops(), 3 * 2 * (2 * per_block));
}

TEST(FlopCounterTest, AnalyticFlopsOfEveryBuiltInModelEqualTheCountedOnes) {
  for (const std::string& name : zoo_model_names()) {
    const ModelSpec s = small_zoo_spec(name);
    const auto analytic = analytic_flops(resolve_model_spec(s));
    ASSERT_TRUE(analytic) << name;
    EXPECT_NEAR(counted_training_flops(s, 2), 2 * analytic->training_per_sample, 1e-9 * analytic->training_per_sample)
        << name;
    EXPECT_NEAR(forward_flops(s, 2), 2 * analytic->forward_per_sample, 1e-9 * analytic->forward_per_sample) << name;
  }
}

// issue 27: a bf16 mlp counted 21.68 MFLOP a sample against 15.86 analytic (products that the
// CPU's bf16 path runs through other counted products were counted twice). A model computes the
// same multiply-adds whatever dtype it multiplies in.
TEST(FlopCounterTest, UnderBf16AutocastEveryBuiltInModelCountsItsAnalyticFlops) {
  for (const std::string& name : zoo_model_names()) {
    const ModelSpec s = small_zoo_spec(name);
    const auto analytic = analytic_flops(resolve_model_spec(s));
    ASSERT_TRUE(analytic) << name;
    EXPECT_NEAR(counted_training_flops(s, 2, Precision::kBf16), 2 * analytic->training_per_sample,
                1e-9 * analytic->training_per_sample)
        << name;
  }
}

TEST(FlopCounterTest, ATorchScriptFileHasNoAnalyticFlops) {
  EXPECT_FALSE(analytic_flops(spec_of("/tmp/model.pt")));
}

TEST(ComputeObserverTest, AProbeTrialReportsItsFlopsAndAnMfuAgainstTheMeasuredGemmPeak) {
  ModelSpec s = spec_of("mlp");
  s.width = 256;
  Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdamW);
  auto meter = make_memory_meter(torch::kCPU);
  Probe probe(w, *meter);
  const GemmPeak peak = measure_gemm_peak(torch::kCPU, Precision::kFp32);
  ASSERT_GT(peak.flops_per_s, 0);
  ComputeObserver compute(peak);
  probe.add_observer(&compute);
  const Trial t = probe.run(32, {1, 2, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  ASSERT_TRUE(saturate::testing::findings_json(t).contains("compute")) << saturate::testing::findings_json(t).dump();
  const nlohmann::json c = saturate::testing::findings_json(t)["compute"];
  const double per_sample = analytic_flops(resolve_model_spec(s))->training_per_sample;
  EXPECT_NEAR(c["flops_per_sample"].get<double>(), per_sample, 1e-9 * per_sample);
  // achieved = FLOPs per step / the median step time, mfu = achieved / peak
  const double achieved = c["achieved_flops_per_s"].get<double>();
  EXPECT_NEAR(achieved, 32 * per_sample / (t.step_time_ms / 1000), 1e-6 * achieved);
  EXPECT_NEAR(c["mfu"].get<double>(), achieved / peak.flops_per_s, 1e-12);
}

TEST(ComputeObserverTest, ATrialThatRunsOutOfMemoryReportsNoFlops) {
  Workload w(build_model(resolve_model_spec(spec_of("mlp"))), torch::kCPU, OptimizerKind::kSgd);
  auto meter = make_memory_meter(torch::kCPU);
  Probe probe(w, *meter);
  GemmPeak peak;
  peak.flops_per_s = 1e9;
  ComputeObserver compute(peak);
  probe.add_observer(&compute);
  const Trial t = probe.run(4096, {1, 1, 20 << 20});  // 20 MiB: the mlp's weights and gradients alone take ~14
  ASSERT_FALSE(t.ok());
  EXPECT_FALSE(saturate::testing::findings_json(t).contains("compute"));
  // and the counter of the failed step is gone: a new one can count
  FlopCounter after;
  EXPECT_EQ(after.total_flops(), 0);
}

TEST(GemmPeakTest, TheCpuPeakIsMeasuredOnceAndNamesItsMethod) {
  const GemmPeak a = measure_gemm_peak(torch::kCPU, Precision::kFp32);
  const GemmPeak b = measure_gemm_peak(torch::kCPU, Precision::kFp32);
  EXPECT_GT(a.flops_per_s, 1e8);  // any CPU of this decade multiplies faster than 0.1 GFLOP/s
  EXPECT_EQ(a.flops_per_s, b.flops_per_s);
  EXPECT_EQ(a.method().rfind("measured: fp32 GEMM 1024^3, best of 10, ", 0), 0u) << a.method();
  EXPECT_EQ(a.threads, at::get_num_threads());
  EXPECT_GE(a.others_busy_cpus, 0);  // /proc/stat is readable here
}

TEST(GemmPeakTest, ARateAboveThePeakHasItMeasuredAgainAndTheHigherOneCounts) {
  GemmPeak peak;
  peak.flops_per_s = 1e9;
  std::string why;
  int calls = 0;
  const auto again = [&] {
    ++calls;
    GemmPeak p;
    p.flops_per_s = 4e9;
    return p;
  };
  EXPECT_DOUBLE_EQ(*checked_mfu(5e8, peak, again, &why), 0.5);  // below the peak: not measured again
  EXPECT_EQ(calls, 0);
  EXPECT_DOUBLE_EQ(*checked_mfu(2e9, peak, again, &why), 0.5);  // 2e9 outran 1e9: 4e9 is the peak now
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(peak.flops_per_s, 4e9);
  EXPECT_EQ(peak.first_flops_per_s, 1e9);
  EXPECT_TRUE(why.empty()) << why;
  // a rate above a peak measured twice: no MFU, and why
  EXPECT_FALSE(checked_mfu(8e9, peak, again, &why));
  EXPECT_NE(why.find("measured twice"), std::string::npos) << why;
  EXPECT_NE(why.find("FLOP count or its time is wrong"), std::string::npos) << why;
}

// issue 27: "160.7 % MFU" where the peak had been measured once, under load. A peak far too low
// (as if every core had been taken while it was measured) is measured again when a trial outruns it.
TEST(ComputeObserverTest, APeakMeasuredTooLowIsMeasuredAgainAndNoTrialShowsAnMfuAboveOne) {
  ModelSpec s = spec_of("mlp");
  s.width = 256;
  Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdamW);
  auto meter = make_memory_meter(torch::kCPU);
  Probe probe(w, *meter);
  GemmPeak low = measure_gemm_peak(torch::kCPU, Precision::kFp32);
  low.flops_per_s = 1e6;
  ComputeObserver compute(low, [] { return measure_gemm_peak(torch::kCPU, Precision::kFp32, false, /*again=*/true); });
  probe.add_observer(&compute);
  for (const int64_t batch : {8, 32}) {
    const Trial t = probe.run(batch, {1, 2, 0});
    ASSERT_TRUE(t.ok()) << t.error;
    const nlohmann::json c = saturate::testing::findings_json(t)["compute"];
    ASSERT_TRUE(c.contains("mfu")) << c.dump();
    EXPECT_GT(c["mfu"].get<double>(), 0);
    EXPECT_LE(c["mfu"].get<double>(), 1.0) << c.dump();
  }
  EXPECT_EQ(compute.peak().first_flops_per_s, 1e6);
  EXPECT_GT(compute.peak().flops_per_s, 1e8);
  EXPECT_NE(compute.peak().method().find("measured again"), std::string::npos) << compute.peak().method();
  EXPECT_TRUE(compute.mfu_note().empty()) << compute.mfu_note();
}

TEST(ComputeObserverTest, ATrialAboveAPeakMeasuredTwiceGetsNoMfuAndANote) {
  Workload w(build_model(resolve_model_spec(spec_of("mlp"))), torch::kCPU, OptimizerKind::kSgd);
  auto meter = make_memory_meter(torch::kCPU);
  Probe probe(w, *meter);
  GemmPeak low;
  low.flops_per_s = 1e6;  // and measured again: the same (a FLOP count that is wrong looks so)
  ComputeObserver compute(low, [low] { return low; });
  probe.add_observer(&compute);
  const Trial t = probe.run(16, {1, 2, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  const nlohmann::json c = saturate::testing::findings_json(t)["compute"];
  EXPECT_TRUE(c.contains("achieved_flops_per_s")) << c.dump();
  EXPECT_FALSE(c.contains("mfu")) << c.dump();
  EXPECT_NE(compute.mfu_note().find("measured twice"), std::string::npos) << compute.mfu_note();
}

// issue 27: a user's step under bf16 autocast was counted against an fp32 peak (the Python search
// measures fp32: autocast is inside the step). The counter names the dtype the products ran in and
// the observer measures the peak in it, once; an fp32 step keeps its fp32 peak.
TEST(ComputeObserverTest, AStepWhoseProductsRanInBf16IsCountedAgainstABf16PeakMeasuredOnce) {
  for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
    Workload w(build_model(resolve_model_spec(spec_of("mlp"))), torch::kCPU, OptimizerKind::kSgd);
    auto meter = make_memory_meter(torch::kCPU);
    Probe probe(w, *meter);
    TrainingFootprint f;
    f.precision = precision;
    probe.set_footprint(f);
    GemmPeak fp32;
    fp32.dtype = "fp32";
    fp32.flops_per_s = 1e15;  // far above the step: MFU against it is never outrun
    std::vector<Precision> asked;
    const auto measure_in = [&asked](Precision p, bool) {
      asked.push_back(p);
      GemmPeak g;
      g.dtype = p == Precision::kBf16 ? "bf16" : "other";
      g.flops_per_s = 2e15;
      return g;
    };
    ComputeObserver compute(fp32, {}, measure_in);
    probe.add_observer(&compute);
    for (const int64_t batch : {8, 16}) {
      const Trial t = probe.run(batch, {1, 1, 0});
      ASSERT_TRUE(t.ok()) << t.error;
      const nlohmann::json c = saturate::testing::findings_json(t)["compute"];
      ASSERT_TRUE(c.contains("mfu")) << c.dump();
      // MFU is the achieved rate over the peak the observer holds now
      EXPECT_NEAR(c["mfu"].get<double>() * compute.peak().flops_per_s, c["achieved_flops_per_s"].get<double>(),
                  1e-6 * c["achieved_flops_per_s"].get<double>());
    }
    if (precision == Precision::kBf16) {
      EXPECT_EQ(asked, std::vector<Precision>{Precision::kBf16});
      EXPECT_EQ(compute.peak().dtype, "bf16");
    } else {
      EXPECT_TRUE(asked.empty());
      EXPECT_EQ(compute.peak().dtype, "fp32");
    }
  }
}

TEST(FlopCounterTest, TheFlopsAreSplitByTheDtypeTheProductsRanIn) {
  for (const Precision precision : {Precision::kBf16, Precision::kFp32}) {
    Workload w(build_model(resolve_model_spec(spec_of("convnet"))), torch::kCPU, OptimizerKind::kSgd);
    StepOptions o;
    o.precision = precision;
    TrainingStep step(w, o);
    const Batch b = w.synthetic_batch(4);
    FlopCounter counter;
    (void)step.run(b);
    const std::string want = precision == Precision::kBf16 ? "bf16" : "fp32";
    EXPECT_EQ(counter.dominant_dtype(), want);
    double sum = 0;
    for (const auto& [dtype, flops] : counter.flops_by_dtype()) sum += flops;
    EXPECT_DOUBLE_EQ(sum, counter.total_flops());
    EXPECT_GT(counter.flops_by_dtype()[want], 0.9 * counter.total_flops());
  }
}

TEST(GemmPeakTest, TheBf16PeakOfAGpuIsMeasuredInBf16_CUDA) {
  SKIP_WITHOUT_CUDA();
  const GemmPeak p = measure_gemm_peak(torch::Device(torch::kCUDA, 0), Precision::kBf16);
  EXPECT_EQ(p.dtype, "bf16");
  EXPECT_GT(p.flops_per_s, 1e13);  // any data-center GPU's bf16 tensor cores exceed 10 TFLOP/s
}

// Trials of the built-in step with a training run's footprint: the loader's prefetched global
// batches, the in-use global batch and the evaluation pass are held (and so counted) during the
// trial; accumulation runs two micro-batches; fp16 on CPU and checkpointing without blocks are
// refused before any trial.
#include "saturate/probe/workload_trial_step.h"

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/probe/probe.h"
#include "support/support.h"

using namespace saturate;

namespace {

constexpr int64_t kSampleBytes = 784 * 4 + 8;  // a 1x28x28 float image and its int64 label

struct TrialRig {
  TrialRig() {
    ModelSpec s;
    s.name = "mlp";
    s.width = 128;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kAdam);
    meter->set_budget_bytes(int64_t{512} << 20);
  }
  ~TrialRig() { set_cpu_budget_bytes(0); }
  Trial run(const TrainingFootprint& f, int64_t batch) {
    Probe probe(*workload, *meter);
    probe.set_footprint(f);
    return probe.run(batch, {1, 1, 0});
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
};

}  // namespace

TEST(WorkloadTrialStepTest, TheLoadersPrefetchedGlobalBatchesAreHeldDuringTheTrial) {
  TrialRig rig;
  TrainingFootprint plain;
  TrainingFootprint held;
  held.global_batch = 2048;
  held.prefetched_batches = 4;
  const Trial a = rig.run(plain, 32);
  const Trial b = rig.run(held, 32);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  // four prefetched global batches and the one in use, less the plain trial's own batch of 32
  const int64_t held_bytes = 5 * 2048 * kSampleBytes - 32 * kSampleBytes;
  EXPECT_GE(b.peak_allocated_bytes - a.peak_allocated_bytes, held_bytes);
  EXPECT_LE(b.peak_allocated_bytes - a.peak_allocated_bytes, held_bytes + (int64_t{2} << 20));  // + a 2nd micro-batch
  EXPECT_EQ(b.after_bytes, b.baseline_bytes) << "the held batches are released after the trial";
  EXPECT_EQ(b.findings.setup.resident_data_bytes, 5 * 2048 * kSampleBytes);
}

TEST(WorkloadTrialStepTest, AWindowOfMicroBatchesHoldsTheGlobalBatchInUseAndMicroBatchesBesideIt) {
  TrialRig rig;
  TrainingFootprint globals;
  globals.global_batch = 2048;
  globals.prefetched_batches = 4;
  TrainingFootprint micros = globals;
  micros.prefetches_micro_batches = true;
  const Trial g = rig.run(globals, 32);
  const Trial m = rig.run(micros, 32);
  ASSERT_TRUE(g.ok() && m.ok()) << g.error << m.error;
  // four windows of 2048 become four of 32: the trial holds 4 x (2048 - 32) samples less
  const int64_t saved_bytes = 4 * (2048 - 32) * kSampleBytes;
  EXPECT_GE(g.peak_allocated_bytes - m.peak_allocated_bytes, saved_bytes - (int64_t{1} << 20));
  EXPECT_LE(g.peak_allocated_bytes - m.peak_allocated_bytes, saved_bytes + (int64_t{1} << 20));
  EXPECT_EQ(m.findings.setup.resident_data_bytes, (2048 + 4 * 32) * kSampleBytes);
  EXPECT_EQ(m.findings.setup.prefetched_batch_samples, 32);
  EXPECT_EQ(g.findings.setup.prefetched_batch_samples, 2048);
  TrainingFootprint accumulating;
  accumulating.accumulation = 4;
  accumulating.prefetched_batches = 2;
  accumulating.prefetches_micro_batches = true;
  WorkloadTrialStep step(*rig.workload, accumulating);
  EXPECT_EQ(step.resident_data_bytes(100), (400 + 2 * 100) * kSampleBytes) << "the global batch of 4 x 100 in use, "
                                                                              "2 micro-batches of 100 ahead";
}

TEST(WorkloadTrialStepTest, ATrialMeasuresTheForwardAndBackwardPeakApartFromTheOptimizers) {
  // at batch 2 Adam's step (its state and temporaries) holds the peak and hides the activations;
  // at a large batch the backward holds it. The search sizes its jumps on the first.
  TrialRig rig;
  const Trial small = rig.run({}, 2);
  const Trial large = rig.run({}, 4096);
  ASSERT_TRUE(small.ok() && large.ok()) << small.error << large.error;
  EXPECT_GT(small.pre_optimizer_peak_bytes, small.baseline_bytes);
  EXPECT_LT(small.pre_optimizer_peak_bytes, small.peak_reserved_bytes) << "the optimizer's peak is above it";
  EXPECT_EQ(large.pre_optimizer_peak_bytes, large.peak_reserved_bytes) << "the backward's is the peak";
  EXPECT_GT(large.pre_optimizer_peak_bytes - small.pre_optimizer_peak_bytes, 4094 * kSampleBytes)
      << "it grows with the batch: at least the inputs";
}

TEST(WorkloadTrialStepTest, WithAFixedAccumulationTheHeldGlobalBatchGrowsWithTheMicroBatch) {
  TrialRig rig;
  TrainingFootprint f;
  f.accumulation = 4;
  f.prefetched_batches = 2;
  WorkloadTrialStep step(*rig.workload, f);
  EXPECT_EQ(step.resident_data_bytes(100), 3 * 400 * kSampleBytes);  // 2 prefetched + 1 in use, of 4 x 100
  EXPECT_EQ(step.samples_per_step(100), 200);
  const Trial t = rig.run(f, 100);
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_GE(t.peak_allocated_bytes - t.baseline_bytes, 3 * 400 * kSampleBytes);
}

TEST(WorkloadTrialStepTest, AnAccumulatingTrialStepRunsTwoMicroBatches) {
  TrialRig rig;
  TrainingFootprint f;
  f.global_batch = 1000;
  WorkloadTrialStep step(*rig.workload, f);
  EXPECT_EQ(step.samples_per_step(64), 128);
  EXPECT_EQ(step.samples_per_step(600), 1000);  // the global batch is all there is
  EXPECT_EQ(step.samples_per_step(1000), 1000);
}

TEST(WorkloadTrialStepTest, TheEvaluationPassAndItsLoadersWindowCountInThePeak) {
  TrialRig rig;
  TrainingFootprint without;
  TrainingFootprint with_eval;
  with_eval.eval_batch_per_micro = 64;  // a window far above the step's own transients
  with_eval.eval_prefetched_batches = 4;
  const int64_t micro = 16;
  const Trial a = rig.run(without, micro);
  const Trial b = rig.run(with_eval, micro);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  // the evaluation loader's window of four batches of 1024 and the batch in use, held beside
  // the parameters, gradients and optimizer state
  EXPECT_GE(b.peak_allocated_bytes - a.peak_allocated_bytes, 5 * 64 * micro * kSampleBytes - (int64_t{1} << 20));
  EXPECT_EQ(b.findings.setup.eval_batch, 64 * micro);
}

TEST(WorkloadTrialStepTest, AnEvaluationThatDoesNotFitMakesTheTrialAnOom) {
  TrialRig rig;
  rig.meter->set_budget_bytes(int64_t{24} << 20);
  TrainingFootprint f;
  f.eval_batch = 200000;  // 600 MiB of evaluation inputs
  const Trial t = rig.run(f, 8);
  EXPECT_EQ(t.status, TrialStatus::kOom) << t.error;
  EXPECT_EQ(t.after_bytes, t.baseline_bytes);
}

TEST(WorkloadTrialStepTest, NegativeFootprintsAndFp16OnCpuAreUsageErrors) {
  TrialRig rig;
  TrainingFootprint negative;
  negative.prefetched_batches = -1;
  try {
    WorkloadTrialStep step(*rig.workload, negative);
    FAIL() << "a negative prefetch count was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.option(), "prefetched_batches");
    EXPECT_NE(std::string(e.what()).find("-1 is negative"), std::string::npos) << e.what();
  }
  TrainingFootprint fp16;
  fp16.precision = Precision::kFp16;
  ASSERT_THROWS_WITH(WorkloadTrialStep(*rig.workload, fp16), UsageError, "use bf16 on CPU");
}

TEST(WorkloadTrialStepTest, Bf16TrialsFitALargerBatchThanFp32OnTheGptModel) {
  ModelSpec s;
  s.name = "gpt";
  s.layers = 2;
  s.width = 128;
  s.heads = 4;
  s.seq_len = 64;
  s.vocab = 2048;
  auto meter = make_memory_meter(torch::kCPU);
  Workload w(build_model(s), torch::kCPU, OptimizerKind::kAdam);
  meter->set_budget_bytes(int64_t{96} << 20);
  Probe probe(w, *meter);
  const auto max_of = [&](Precision p) {
    TrainingFootprint f;
    f.precision = p;
    probe.set_footprint(f);
    int64_t lo = 1, hi = 1;
    while (probe.run(hi, {1, 1, 0}).ok()) lo = hi, hi *= 2;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      (probe.run(mid, {1, 1, 0}).ok() ? lo : hi) = mid;
    }
    return lo;
  };
  const int64_t fp32 = max_of(Precision::kFp32);
  const int64_t bf16 = max_of(Precision::kBf16);
  set_cpu_budget_bytes(0);
  EXPECT_GT(bf16, fp32) << "bf16 max " << bf16 << " vs fp32 max " << fp32;
}

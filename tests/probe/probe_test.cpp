// The real probe on CPU with a byte budget: OOM is a result, memory returns to the baseline, and
// the search's answers hold when checked by fresh, independent probes.
#include "saturate/probe/probe.h"

#include <atomic>
#include <thread>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/search/search.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct CpuRig {
  CpuRig(const std::string& model, int64_t budget_bytes, std::vector<int64_t> input = {},
         OptimizerKind opt = OptimizerKind::kAdam) {
    ModelSpec s;
    s.name = model;
    s.input_shape = std::move(input);
    if (model == "mlp") s.width = 256;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, opt);
    meter->set_budget_bytes(budget_bytes);
    probe = std::make_unique<Probe>(*workload, *meter);
  }
  ~CpuRig() { set_cpu_budget_bytes(0); }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  std::unique_ptr<Probe> probe;
};

}  // namespace

TEST(ProbeTest, FittingTrialReportsTimeAndPeak) {
  CpuRig rig("mlp", 256 << 20);
  const Trial t = rig.probe->run(64, {1, 3, 0});
  ASSERT_EQ(t.status, TrialStatus::kOk) << t.error;
  EXPECT_EQ(t.steps, 4);
  EXPECT_GT(t.step_time_ms, 0);
  EXPECT_NEAR(t.samples_per_s, 64 * 1000.0 / t.step_time_ms, 1e-6);
  // at least parameters + gradients + Adam's two states of the 256-wide mlp
  const int64_t params = 784 * 256 + 256 + 2 * (256 * 256 + 256) + 256 * 10 + 10;
  EXPECT_GE(t.peak_allocated_bytes, 4 * params * 4);
  EXPECT_EQ(t.after_bytes, t.baseline_bytes);
}

TEST(ProbeTest, ATrialBesideBusyThreadsCountsItsStepsWaitForACpuApartFromTheirOwnTime) {
  CpuRig rig("mlp", 256 << 20);
  const Trial quiet = rig.probe->run(64, {1, 20, 0});
  ASSERT_EQ(quiet.status, TrialStatus::kOk) << quiet.error;
  ASSERT_GE(quiet.run_queue_wait_ms, 0) << "this kernel keeps no per-thread scheduler statistics";
  EXPECT_GE(quiet.own_samples_per_s, quiet.samples_per_s);
  // one busy thread per CPU beside the probe's: its thread now waits for a CPU in turns
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    busy.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  Trial t;
  for (int tries = 0; tries < 50 && !(t.run_queue_wait_ms > 0); ++tries) t = rig.probe->run(64, {1, 20, 0});
  stop = true;
  for (auto& b : busy) b.join();
  ASSERT_EQ(t.status, TrialStatus::kOk) << t.error;
  EXPECT_GT(t.run_queue_wait_ms, 0);
  EXPECT_LT(t.run_queue_wait_ms, 1000 * t.seconds);  // a part of the trial's time, not its CPU time
  // the own speed leaves the wait out: at least the wall clock's, and not the near-zero time that
  // wall minus CPU time would leave (a wrong field read)
  EXPECT_GE(t.own_samples_per_s, t.samples_per_s);
  EXPECT_LT(t.own_samples_per_s, 5 * t.samples_per_s);
}

TEST(ProbeTest, OutOfMemoryTrialsReturnMemoryToTheBaseline) {
  CpuRig rig("mlp", 64 << 20);
  const int64_t baseline = rig.meter->stats().allocated_bytes;
  // OOMs at different depths: creating the batch, in forward, in backward or in the optimizer.
  for (int64_t batch : {200000, 40000, 20000, 12000}) {
    const Trial t = rig.probe->run(batch, {1, 1, 0});
    EXPECT_EQ(t.status, TrialStatus::kOom) << "batch " << batch << ": " << t.error;
    EXPECT_EQ(t.after_bytes, baseline) << "batch " << batch;
    EXPECT_EQ(rig.meter->stats().allocated_bytes, baseline);
  }
  // and the process is healthy: the next trial runs.
  const Trial ok = rig.probe->run(32, {1, 1, 0});
  EXPECT_EQ(ok.status, TrialStatus::kOk) << ok.error;
  EXPECT_EQ(ok.after_bytes, baseline);
}

TEST(ProbeTest, OutOfMemoryInAResnetStepReturnsMemoryToTheBaseline) {
  // convolutions, batch norm and residual blocks: OOMs at many depths of the step, backward among
  // them (a backward that throws leaves its unrun nodes, and their activations, queued)
  CpuRig rig("resnet18", 200 << 20, {3, 32, 32});
  const int64_t baseline = rig.meter->stats().allocated_bytes;
  int ooms = 0;
  for (int64_t batch = 100; batch <= 400; batch += 20) {
    const Trial t = rig.probe->run(batch, {1, 1, 0});
    if (t.status != TrialStatus::kOom) continue;
    ++ooms;
    EXPECT_EQ(t.after_bytes, baseline) << "batch " << batch << ": " << t.error;
  }
  EXPECT_GE(ooms, 5);
}

TEST(ProbeTest, LoweredBudgetForOneTrialIsRestoredAfterwards) {
  CpuRig rig("mlp", 128 << 20);
  const Trial t = rig.probe->run(4000, {1, 1, 8 << 20});
  EXPECT_EQ(t.status, TrialStatus::kOom);
  EXPECT_EQ(t.budget_bytes, 8 << 20);
  EXPECT_EQ(rig.meter->budget_bytes(), 128 << 20);
}

TEST(ProbeTest, ModelErrorsAreResultsWithTheMessage) {
  ModelSpec s;
  s.name = "convnet";
  auto meter = make_memory_meter(torch::kCPU);
  BuiltModel b = build_model(s);
  b.sample_shape = {3, 28, 28};  // the convnet expects one channel
  Workload w(std::move(b), torch::kCPU, OptimizerKind::kSgd);
  Probe probe(w, *meter);
  const Trial t = probe.run(4, {1, 1, 0});
  EXPECT_EQ(t.status, TrialStatus::kError);
  EXPECT_NE(t.error.find("channels"), std::string::npos) << t.error;
}

namespace {

void expect_exact_search(const std::string& model, int64_t budget, std::vector<int64_t> input = {}) {
  int64_t found = 0, recommended = 0, target = 0;
  {
    CpuRig rig(model, budget, input);
    SearchOptions opt;
    const SearchResult r = search_batch_size(*rig.probe, opt);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.max_batch_exact);
    found = r.max_batch;
    recommended = r.recommended_batch;
    target = r.target_bytes;
    EXPECT_GT(found, 8);
  }
  // fresh rigs, one at a time (the CPU budget counts every live tensor of the process), so that
  // nothing of the search's state helps the check.
  {
    CpuRig fits(model, budget, input);
    const Trial at_max = fits.probe->run(found, {1, 1, 0});
    EXPECT_EQ(at_max.status, TrialStatus::kOk) << model << " at max " << found << ": " << at_max.error;
  }
  {
    CpuRig over(model, budget, input);
    const Trial above = over.probe->run(found + 1, {1, 1, 0});
    EXPECT_EQ(above.status, TrialStatus::kOom) << model << " at max+1 " << found + 1;
  }
  {
    CpuRig rec(model, budget, input);
    const Trial t = rec.probe->run(recommended, {1, 1, 0});
    EXPECT_EQ(t.status, TrialStatus::kOk);
    EXPECT_LE(t.peak_reserved_bytes, target);
  }
}

}  // namespace

TEST(ProbeTest, SearchFindsTheExactMaxBatchOfMlpUnderACpuBudget) { expect_exact_search("mlp", 40 << 20); }

TEST(ProbeTest, SearchFindsTheExactMaxBatchOfConvnetUnderACpuBudget) {
  expect_exact_search("convnet", 32 << 20, {1, 16, 16});
}

TEST(ProbeTest, SearchFindsTheExactMaxBatch_CUDA) {
  SKIP_WITHOUT_CUDA();
  ModelSpec s;
  s.name = "convnet";
  auto meter = make_memory_meter(torch::Device(torch::kCUDA, 0));
  Workload w(build_model(s), torch::Device(torch::kCUDA, 0), OptimizerKind::kAdam);
  meter->set_budget_bytes(512 << 20);
  Probe probe(w, *meter);
  const SearchResult r = search_batch_size(probe, SearchOptions{});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.max_batch_exact);
  EXPECT_EQ(probe.run(r.max_batch, {1, 1, 0}).status, TrialStatus::kOk);
  EXPECT_EQ(probe.run(r.max_batch + 1, {1, 1, 0}).status, TrialStatus::kOom);
  meter->set_budget_bytes(meter->capacity_bytes());
}

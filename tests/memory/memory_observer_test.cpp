// The memory breakdown of real training steps on the CPU budget: exact parts equal the byte
// counts of the architecture, and the parts add up to the measured peak. Tolerance: none on the
// CPU (the log is the allocator's own record of the bytes the peak counts).
#include "saturate/memory/memory_observer.h"

#include <fstream>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/memory/timeline.h"
#include "saturate/probe/probe.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct ObserverRig {
  explicit ObserverRig(ModelSpec s, OptimizerKind opt = OptimizerKind::kAdam) {
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, opt);
    meter->set_budget_bytes(int64_t{1} << 30);
    probe = std::make_unique<Probe>(*workload, *meter);
    observer = std::make_unique<MemoryObserver>(*workload);
    probe->add_observer(observer.get());
  }
  ~ObserverRig() { set_cpu_budget_bytes(0); }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  std::unique_ptr<Probe> probe;
  std::unique_ptr<MemoryObserver> observer;
};

ModelSpec mlp_spec() {
  ModelSpec s;
  s.name = "mlp";  // 784 -> 1024 -> 1024 -> 1024 -> 10
  return s;
}

// the default mlp's parameters, counted by hand from its layers (weights + biases).
constexpr int64_t kMlpParams = (784 * 1024 + 1024) + 2 * (1024 * 1024 + 1024) + (1024 * 10 + 10);
static_assert(kMlpParams == 2913290);

}  // namespace

TEST(MemoryBreakdownTest, MlpWithAdamHasExactParameterGradientAndOptimizerStateBytes) {
  ObserverRig rig(mlp_spec());
  const int64_t batch = 8;
  const Trial t = rig.probe->run(batch, {1, 1, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  const MemoryBreakdown& b = rig.observer->last_breakdown();
  EXPECT_EQ(b.parameters_bytes, kMlpParams * 4);
  EXPECT_EQ(b.gradients_bytes, kMlpParams * 4);
  EXPECT_EQ(b.optimizer_state_bytes, kMlpParams * 8);  // Adam: two fp32 moments per parameter
  EXPECT_EQ(b.inputs_bytes, batch * 784 * 4 + batch * 8);  // fp32 images, int64 labels
  EXPECT_EQ(b.peak_phase, "optimizer");
  // the log's peak is the meter's, exactly on the CPU budget; every byte at it has a named part
  // ("other" is what no part claims: the parts add up by construction, so that is the check)
  EXPECT_EQ(b.peak_allocated_bytes, t.peak_allocated_bytes);
  EXPECT_EQ(b.other_bytes, 0);  // the mlp has no buffers
  // and it is in the trial's JSON.
  ASSERT_TRUE(t.findings.memory_breakdown);
  EXPECT_EQ(t.findings.memory_breakdown->optimizer_state_bytes, kMlpParams * 8);
}

TEST(MemoryBreakdownTest, SgdWithMomentumKeepsOneBufferPerParameter) {
  ObserverRig rig(mlp_spec(), OptimizerKind::kSgd);
  const Trial t = rig.probe->run(4, {1, 1, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  const MemoryBreakdown& b = rig.observer->last_breakdown();
  EXPECT_EQ(b.optimizer_state_bytes, kMlpParams * 4);
  EXPECT_EQ(b.parameters_bytes, kMlpParams * 4);
  EXPECT_EQ(b.peak_allocated_bytes, t.peak_allocated_bytes);
  EXPECT_EQ(b.other_bytes, 0);
}

TEST(MemoryBreakdownTest, LargeBatchPeaksInBackwardWithActivationsEveryByteNamed) {
  ModelSpec s = mlp_spec();
  s.width = 256;
  ObserverRig rig(s);
  const Trial t = rig.probe->run(2048, {1, 1, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  const MemoryBreakdown& b = rig.observer->last_breakdown();
  EXPECT_EQ(b.peak_phase, "backward");  // 2048 samples' activations outweigh Adam's state of a small mlp
  EXPECT_GT(b.activations_bytes, 0);
  EXPECT_GT(b.saved_for_backward_bytes, 3 * 2048 * 256 * 4);  // at least the three ReLU outputs
  EXPECT_EQ(b.inputs_bytes, 2048 * 784 * 4 + 2048 * 8);
  EXPECT_EQ(b.peak_allocated_bytes, t.peak_allocated_bytes);
  EXPECT_EQ(b.other_bytes, 0);
}

TEST(MemoryBreakdownTest, ConvnetBuffersAndOomTrialsAreAccountedFor) {
  ModelSpec s;
  s.name = "convnet";
  ObserverRig rig(s);
  // the BatchNorm buffers (running mean and variance, the batch count), counted from the model:
  // held, but no parameter, gradient or optimizer state; they are what "other" holds
  int64_t buffers = 0, params = 0;
  for (const auto& b : rig.workload->model().module()->buffers()) buffers += b.numel() * b.element_size();
  for (const auto& p : rig.workload->model().parameters()) params += p.numel() * p.element_size();
  ASSERT_GT(buffers, 0);
  const Trial ok = rig.probe->run(4, {1, 1, 0});
  ASSERT_TRUE(ok.ok()) << ok.error;
  const MemoryBreakdown& fit = rig.observer->last_breakdown();
  EXPECT_EQ(fit.parameters_bytes, params);
  EXPECT_LE(fit.gradients_bytes, params);  // those made by the peak (it comes in the backward here)
  EXPECT_EQ(fit.optimizer_state_bytes, 2 * params);  // Adam
  EXPECT_EQ(fit.other_bytes, buffers);
  EXPECT_EQ(fit.peak_allocated_bytes, ok.peak_allocated_bytes);
  const Trial oom = rig.probe->run(4, {1, 1, ok.baseline_bytes + 4096});  // a budget just over the parameters
  EXPECT_EQ(oom.status, TrialStatus::kOom);
  // the trial that ran out still names what it held when it stopped: the weights and buffers
  const MemoryBreakdown& b = rig.observer->last_breakdown();
  EXPECT_EQ(b.parameters_bytes, params);
  EXPECT_EQ(b.other_bytes, buffers);
}

TEST(MemoryTimelineTest, OneStepHasForwardBackwardAndOptimizerAndWritesSvg) {
  ObserverRig rig(mlp_spec());
  ASSERT_TRUE(rig.probe->run(16, {1, 1, 0}).ok());
  const Timeline t = build_timeline(rig.observer->last_log());
  EXPECT_EQ(t.step, 1);
  std::vector<std::string> phases;
  for (const auto& p : t.phases) phases.push_back(p.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"forward", "backward", "optimizer"}));
  EXPECT_GT(t.points.size(), 10u);
  EXPECT_FALSE(t.largest_at_peak.empty());
  const std::string dir = saturate::testing::temp_dir("timeline");
  write_timeline(t, dir + "/t.svg", "mlp");
  write_timeline(t, dir + "/t.json", "mlp");
  std::ifstream svg(dir + "/t.svg"), json(dir + "/t.json");
  std::string first;
  std::getline(svg, first);
  EXPECT_EQ(first.rfind("<svg", 0), 0u);
  EXPECT_EQ(nlohmann::json::parse(json)["step"], 1);
}

TEST(CpuEventLogTest, OffByDefaultAndRecordsAllocationsWhenOn) {
  EXPECT_FALSE(cpu_event_log_active());
  EXPECT_EQ(cpu_event_log_size(), 0u);
  start_cpu_event_log();
  {
    torch::Tensor x = torch::empty({1000}, torch::kFloat);
  }
  const CpuEventLog log = stop_cpu_event_log();
  EXPECT_FALSE(cpu_event_log_active());
  ASSERT_GE(log.events.size(), 2u);
  EXPECT_EQ(log.events[0].kind, CpuAllocationEvent::kAlloc);
  EXPECT_EQ(log.events[0].bytes, 4000);
  EXPECT_EQ(log.events[1].kind, CpuAllocationEvent::kFree);
  EXPECT_EQ(log.events[1].address, log.events[0].address);
}

TEST(CpuEventLogTest, BudgetRefusalsAreLoggedAndTheBudgetBehavesAsBefore) {
  const int64_t in_use = cpu_memory_counters().allocated_bytes;
  set_cpu_budget_bytes(in_use + 1024);
  start_cpu_event_log(4);
  EXPECT_THROW(torch::empty({1 << 20}, torch::kFloat), c10::OutOfMemoryError);
  for (int i = 0; i < 10; ++i) torch::Tensor small = torch::empty({16}, torch::kFloat);
  const CpuEventLog log = stop_cpu_event_log();
  set_cpu_budget_bytes(0);
  ASSERT_FALSE(log.events.empty());
  EXPECT_EQ(log.events[0].kind, CpuAllocationEvent::kFailed);
  EXPECT_EQ(log.events.size(), 4u);  // capped
  EXPECT_TRUE(log.truncated);
  EXPECT_EQ(cpu_memory_counters().allocated_bytes, in_use);
}

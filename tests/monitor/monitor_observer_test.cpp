// The monitor observer on real CPU probes: the trial JSON it writes, and the bottleneck it
// finds for a data-bound, a launch-bound and a compute-bound workload. Margins are wide on
// purpose (the machine is small and shared): each case sits far from its threshold.
#include "saturate/monitor/monitor_observer.h"

#include <chrono>
#include <thread>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/probe/probe.h"
#include "support/support.h"
#include "monitor/probe_rig.h"
#include "support/trial_findings.h"

namespace saturate {
namespace {

using MonitorObserverRig = testing::MonitoredProbe;

/// A data loader too slow for the model: each batch takes `delay` to arrive.
class SlowSource final : public BatchSource {
 public:
  SlowSource(Workload& w, std::chrono::milliseconds delay) : workload_(w), delay_(delay) {}
  void reset(int64_t batch) override { batch_ = workload_.synthetic_batch(batch); }
  Batch next(int64_t) override {
    std::this_thread::sleep_for(delay_);
    return batch_;
  }

 private:
  Workload& workload_;
  std::chrono::milliseconds delay_;
  Batch batch_;
};

std::string verdict_of(const Trial& t) {
  return t.findings.bottleneck ? t.findings.bottleneck->verdict : "(none)";
}

TEST(MonitorObserverTest, TrialJsonHasPhasesUtilizationBottleneckAndOverhead) {
  MonitorObserverRig rig(32, 1, {1, 8, 8});
  const Trial t = rig.probe->run(4, {1, 3, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  const nlohmann::json phases = saturate::testing::findings_json(t)["phases_ms"];
  for (const char* name : {"data_wait", "h2d", "forward", "backward", "optimizer", "allreduce"})
    EXPECT_TRUE(phases.contains(name)) << name;
  EXPECT_GT(phases["forward"].get<double>(), 0);
  EXPECT_EQ(phases["data_wait"].get<double>(), 0);  // no batch source: no data phase
  const nlohmann::json util = saturate::testing::findings_json(t)["utilization"];
  EXPECT_EQ(util["source"], "proc");
  EXPECT_GE(util["samples"].get<int>(), 2);  // at least the trial's two edges
  EXPECT_GT(util["rss_bytes"]["mean"].get<double>(), 0);
  const nlohmann::json b = saturate::testing::findings_json(t)["bottleneck"];
  EXPECT_TRUE(b["verdict"].is_string());
  EXPECT_TRUE(b["fix"].is_string());
  EXPECT_GT(b["evidence"]["launch"]["ops_per_step"].get<int64_t>(), 10);
  EXPECT_EQ(b["evidence"]["launch"]["counted_on"], "warm-up step");
  EXPECT_TRUE(saturate::testing::findings_json(t)["monitor_overhead"].contains("hooks_us_per_step"));
}

TEST(MonitorObserverTest, SlowBatchSourceIsDataBound) {
  MonitorObserverRig rig(16, 1, {1, 8, 8});
  SlowSource source(*rig.workload, std::chrono::milliseconds(60));
  rig.probe->set_batch_source(&source);
  // five timed steps: the verdict takes medians, so a step or two preempted by other load on
  // a small shared machine cannot turn it
  const Trial t = rig.probe->run(8, {1, 5, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_EQ(verdict_of(t), "data-bound") << saturate::testing::findings_json(t).dump(1);
  EXPECT_GE(saturate::testing::findings_json(t)["phases_ms"]["data_wait"].get<double>(), 55);
}

TEST(MonitorObserverTest, TinyModelAtBatchOneIsLaunchBound) {
  MonitorObserverRig rig(8, 1, {1, 4, 4});
  const Trial t = rig.probe->run(1, {1, 5, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_EQ(verdict_of(t), "launch-bound") << saturate::testing::findings_json(t).dump(1);
}

TEST(MonitorObserverTest, LargeMatmulsAreComputeBound) {
  MonitorObserverRig rig(512, 3, {1, 32, 32});
  const Trial t = rig.probe->run(128, {1, 3, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_EQ(verdict_of(t), "compute-bound") << saturate::testing::findings_json(t).dump(1);
  EXPECT_LT(saturate::testing::findings_json(t)["bottleneck"]["evidence"]["launch_fraction"].get<double>(), 0.25);
}

TEST(MonitorObserverTest, OutOfMemoryTrialHasUtilizationButNoVerdict) {
  MonitorObserverRig rig(256, 3, {});
  rig.meter->set_budget_bytes(int64_t{48} << 20);
  const Trial t = rig.probe->run(40000, {1, 1, 0});
  ASSERT_EQ(t.status, TrialStatus::kOom) << t.error;
  EXPECT_TRUE(saturate::testing::findings_json(t).contains("utilization"));
  EXPECT_FALSE(saturate::testing::findings_json(t).contains("bottleneck"));
  // the observer is ready for the next trial
  rig.meter->set_budget_bytes(int64_t{1} << 30);
  const Trial ok = rig.probe->run(8, {1, 1, 0});
  EXPECT_TRUE(ok.ok()) << ok.error;
  EXPECT_TRUE(saturate::testing::findings_json(ok).contains("bottleneck"));
}

TEST(MonitorObserverTest, CudaPhasesAreTimedWithEvents_CUDA) {
  SKIP_WITHOUT_CUDA();
  ModelSpec s;
  s.name = "mlp";
  s.width = 256;
  auto meter = make_memory_meter(torch::Device(torch::kCUDA, 0));
  Workload w(build_model(resolve_model_spec(s)), torch::Device(torch::kCUDA, 0), OptimizerKind::kAdam);
  Probe probe(w, *meter);
  MonitorOptions o;
  o.cuda = true;
  MonitorObserver monitor(o);
  probe.add_observer(&monitor);
  const Trial t = probe.run(64, {1, 3, 0});
  ASSERT_TRUE(t.ok()) << t.error;
  EXPECT_GT(saturate::testing::findings_json(t)["phases_ms"]["forward"].get<double>(), 0);
  EXPECT_EQ(saturate::testing::findings_json(t)["bottleneck"]["evidence"]["launch"]["method"], "host issue time / device time of the compute phases");
}

}  // namespace
}  // namespace saturate

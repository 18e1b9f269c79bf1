// The monitor on real CPU training runs: the Trainer's phase hooks (order, accumulation, the
// warm-up step), the train JSON's phases_ms/utilization/bottleneck, a data-bound run (a slow
// TrainData), a communication-bound one (a StepSync whose backward waits), windows, trace.
// Margins are wide on purpose (the machine is small and shared).
#include "saturate/monitor/train_monitor.h"

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <torch/torch.h>

#include "saturate/train/trainer.h"
#include "support/support.h"

namespace saturate {
namespace {

struct TrainMonitorRig {
  explicit TrainMonitorRig(int64_t width = 32, int64_t samples = 256) {
    at::set_num_threads(1);  // small tensors: threads only add waiting on a loaded machine
    ModelSpec s;
    s.name = "mlp";
    s.width = width;
    s.layers = 1;
    s.seed = 7;
    s.input_shape = {1, 8, 8};
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdam);
    torch::manual_seed(123);
    inputs = torch::randn({samples, 1, 8, 8});
    targets = torch::randint(10, {samples});
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  torch::Tensor inputs, targets;
};

/// A loader too slow for the model: every global batch takes `delay` to arrive.
class SlowTrainData final : public TrainData {
 public:
  SlowTrainData(torch::Tensor x, torch::Tensor y, int64_t global, std::chrono::milliseconds delay)
      : inner_(std::move(x), std::move(y), global), delay_(delay) {}
  std::string name() const override { return "slow"; }
  int64_t steps_per_epoch() const override { return inner_.steps_per_epoch(); }
  Batch batch_for_step(int64_t step) override {
    std::this_thread::sleep_for(delay_);
    return inner_.batch_for_step(step);
  }

 private:
  TensorTrainData inner_;
  std::chrono::milliseconds delay_;
};

/// Data parallelism whose all-reduce is slow and not overlapped: the last micro-batch's
/// backward waits `wait` after computing the gradients, and says so.
class SlowAllreduceSync final : public StepSync {
 public:
  explicit SlowAllreduceSync(std::chrono::milliseconds wait) : wait_(wait) {}
  void backward(const torch::Tensor& loss, bool last) override {
    loss.backward();
    exposed_ms_ = 0;
    if (!last) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(wait_);
    exposed_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  double exposed_allreduce_ms() override { return exposed_ms_; }

 private:
  std::chrono::milliseconds wait_;
  double exposed_ms_ = 0;
};

/// Writes down every hook call, to check the Trainer's side of the contract.
class Recorder final : public PhaseObserver {
 public:
  void step_begin(int step, bool measured) override { log.push_back(fmt("begin", step, measured)); }
  void phase_begin(Phase p) override { log.push_back("(" + to_string(p)); }
  void phase_end(Phase p) override { log.push_back(to_string(p) + ")"); }
  void step_end(int step, bool measured) override { log.push_back(fmt("end", step, measured)); }
  std::vector<std::string> log;

 private:
  static std::string fmt(const char* what, int step, bool measured) {
    return std::string(what) + " " + std::to_string(step) + (measured ? " timed" : " warm-up");
  }
};

TrainMonitorOptions quick_windows() {
  TrainMonitorOptions o;
  o.monitor.sample_hz = 20;
  o.window_s = 0;  // every `window_min_steps` timed steps
  o.window_min_steps = 3;
  return o;
}

TEST(TrainMonitorTest, TrainerReportsEachPhaseOfEveryMicroBatchInsideItsStep) {
  TrainMonitorRig rig;
  TensorTrainData data(rig.inputs, rig.targets, 16);
  Recorder rec;
  TrainOptions o;
  o.micro_batch = 8;
  o.accumulation = 2;
  o.max_steps = 2;
  o.observer = &rec;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  // CPU tensors on a CPU device: nothing is copied, so there is no h2d phase (tested with CUDA)
  const std::vector<std::string> step = {"(data_wait", "data_wait)", "(forward", "forward)", "(backward", "backward)",
                                         "(forward", "forward)", "(backward", "backward)", "(optimizer", "optimizer)"};
  std::vector<std::string> expected = {"begin 0 warm-up"};
  expected.insert(expected.end(), step.begin(), step.end());
  expected.insert(expected.end(), {"end 0 warm-up", "begin 1 timed"});
  expected.insert(expected.end(), step.begin(), step.end());
  expected.push_back("end 1 timed");
  EXPECT_EQ(rec.log, expected);
}

TEST(TrainMonitorTest, TrainJsonHasPhasesUtilizationAndBottleneckWithSaneValues) {
  TrainMonitorRig rig;
  TensorTrainData data(rig.inputs, rig.targets, 16);
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 8;
  o.accumulation = 2;
  o.max_steps = 12;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  const auto& phases = j["phases_ms"];
  for (const char* name : {"data_wait", "h2d", "forward", "backward", "optimizer", "allreduce"}) {
    ASSERT_TRUE(phases.contains(name)) << name;
    EXPECT_GE(phases[name].get<double>(), 0) << name;
  }
  EXPECT_GT(phases["forward"].get<double>(), 0);
  EXPECT_GT(phases["backward"].get<double>(), 0);
  EXPECT_GT(phases["optimizer"].get<double>(), 0);
  EXPECT_EQ(phases["allreduce"].get<double>(), 0);  // one process: nothing to all-reduce
  const auto& util = j["utilization"];
  EXPECT_EQ(util["source"], "proc");
  EXPECT_GE(util["samples"].get<int>(), 2);
  EXPECT_GT(util["rss_bytes"]["min"].get<double>(), 0);
  EXPECT_LE(util["rss_bytes"]["min"].get<double>(), util["rss_bytes"]["mean"].get<double>());
  EXPECT_LE(util["rss_bytes"]["mean"].get<double>(), util["rss_bytes"]["max"].get<double>());
  const auto& b = j["bottleneck"];
  EXPECT_NO_THROW(parse_bottleneck(b["verdict"].get<std::string>())) << b.dump(1);
  EXPECT_FALSE(b["fix"].get<std::string>().empty());
  // 11 timed steps in windows of 3: four windows (the first also holds the warm-up step)
  EXPECT_EQ(monitor.windows().size(), 4u);
  EXPECT_EQ(b["evidence"]["windows"]["count"].get<int>(), 4);
  EXPECT_EQ(monitor.windows().front().first_step, 0);
  EXPECT_EQ(monitor.windows().back().last_step, 11);
  // the phases of the representative step lie within it
  const auto& e = b["evidence"];
  EXPECT_GT(e["step_ms"].get<double>(), 0);
  EXPECT_EQ(j["monitor_overhead"]["windows"].get<int>(), 4);
}

TEST(TrainMonitorTest, MonitorWindowsCoverTheRunsStepsInOrderEachWithItsUtilization) {
  TrainMonitorRig rig;
  TensorTrainData data(rig.inputs, rig.targets, 16);
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 16;
  o.max_steps = 14;  // the warm-up step and 13 timed ones: windows of 3 timed steps, the last of 1
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  const auto& windows = j["monitor_windows"];
  ASSERT_TRUE(windows.is_array()) << j.dump(1);
  ASSERT_EQ(windows.size(), 5u) << windows.dump(1);
  int64_t next_step = 0;
  double previous_start = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    const auto& w = windows[i];
    EXPECT_EQ(w["first_step"].get<int64_t>(), next_step) << i;  // no gap, no overlap
    EXPECT_GE(w["last_step"].get<int64_t>(), w["first_step"].get<int64_t>()) << i;
    next_step = w["last_step"].get<int64_t>() + 1;
    EXPECT_GE(w["start_s"].get<double>(), previous_start) << i;
    previous_start = w["start_s"].get<double>();
    EXPECT_GE(w["seconds"].get<double>(), 0) << i;  // to the millisecond: three tiny steps can be 0
    ASSERT_TRUE(w.contains("utilization") && w["utilization"].is_object()) << w.dump(1);
    EXPECT_EQ(w["utilization"]["source"], "proc");
    EXPECT_GE(w["utilization"]["samples"].get<int>(), 1) << w.dump(1);
    EXPECT_TRUE(w["utilization"]["cpu_percent"].contains("mean")) << w.dump(1);
  }
  EXPECT_EQ(next_step, o.max_steps);  // the windows end at the run's last step
  EXPECT_EQ(windows[0]["first_step"].get<int64_t>(), 0);
}

TEST(TrainMonitorTest, SlowTrainDataIsDataBound) {
  TrainMonitorRig rig(16);
  SlowTrainData data(rig.inputs, rig.targets, 8, std::chrono::milliseconds(60));
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 8;
  o.max_steps = 8;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  EXPECT_EQ(j["bottleneck"]["verdict"], "data-bound") << j.dump(1);
  EXPECT_GE(j["phases_ms"]["data_wait"].get<double>(), 55);
  EXPECT_NE(j["bottleneck"]["fix"].get<std::string>().find("worker"), std::string::npos) << j["bottleneck"]["fix"];
  for (const MonitorWindow& w : monitor.windows()) EXPECT_EQ(w.verdict(), "data-bound") << (w.findings.bottleneck ? w.findings.bottleneck->reason : "no verdict");
  EXPECT_NE(monitor.status_text().find("data-bound"), std::string::npos) << monitor.status_text();
}

TEST(TrainMonitorTest, WaitingForTheAllreduceIsItsOwnPhaseAndCommunicationBound) {
  TrainMonitorRig rig(16);
  TensorTrainData data(rig.inputs, rig.targets, 16);
  SlowAllreduceSync sync(std::chrono::milliseconds(120));
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 8;
  o.accumulation = 2;  // only the last micro-batch's backward communicates
  o.max_steps = 7;
  o.sync = &sync;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  EXPECT_EQ(j["bottleneck"]["verdict"], "communication-bound") << j.dump(1);
  EXPECT_GE(j["phases_ms"]["allreduce"].get<double>(), 115);
  // moved out of the backward phase, not counted twice: the backward holds none of the 120 ms
  // sleep (counted twice it would be at least the all-reduce), whatever the machine's speed
  EXPECT_LT(j["phases_ms"]["backward"].get<double>(), 0.5 * j["phases_ms"]["allreduce"].get<double>())
      << j["phases_ms"];
}

TEST(TrainMonitorTest, TrainingTraceHasWindowsStepsAndPhases) {
  const std::string path = saturate::testing::temp_dir("train_trace") + "/train.json";
  TrainMonitorRig rig;
  TensorTrainData data(rig.inputs, rig.targets, 16);
  TrainMonitorOptions mo = quick_windows();
  mo.monitor.trace_path = path;
  TrainMonitor monitor(mo);
  TrainOptions o;
  o.micro_batch = 16;
  o.max_steps = 7;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  monitor.finish();
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::string, int> by_cat;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") ++by_cat[e["cat"].get<std::string>()];
  EXPECT_EQ(by_cat["window"], 2);  // 6 timed steps in windows of 3
  EXPECT_EQ(by_cat["step"], 7);
  EXPECT_EQ(by_cat["phase"], 7 * 4);  // data_wait, forward, backward, optimizer (no copy on CPU: no h2d)
}

TEST(TrainMonitorTest, NoWindowWithoutTimedStepsMeansNoVerdict) {
  TrainMonitorRig rig;
  TensorTrainData data(rig.inputs, rig.targets, 16);
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 16;
  o.max_steps = 1;  // only the warm-up step
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  EXPECT_FALSE(j.contains("bottleneck"));
  EXPECT_FALSE(j.contains("phases_ms"));
  EXPECT_TRUE(j.contains("utilization"));
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

/// The first `slow_steps` batches take `delay` to arrive, the rest none.
class SlowAtFirstTrainData final : public TrainData {
 public:
  SlowAtFirstTrainData(torch::Tensor x, torch::Tensor y, int64_t global, int64_t slow_steps,
                       std::chrono::milliseconds delay)
      : inner_(std::move(x), std::move(y), global), slow_steps_(slow_steps), delay_(delay) {}
  std::string name() const override { return "slow at first"; }
  int64_t steps_per_epoch() const override { return inner_.steps_per_epoch(); }
  Batch batch_for_step(int64_t step) override {
    if (step < slow_steps_) std::this_thread::sleep_for(delay_);
    return inner_.batch_for_step(step);
  }

 private:
  TensorTrainData inner_;
  int64_t slow_steps_;
  std::chrono::milliseconds delay_;
};

/// An all-reduce that is instant for the first `fast_steps` backwards and then waits `wait`.
class SlowLaterAllreduceSync final : public StepSync {
 public:
  SlowLaterAllreduceSync(int64_t fast_steps, std::chrono::milliseconds wait) : fast_steps_(fast_steps), wait_(wait) {}
  void backward(const torch::Tensor& loss, bool last) override {
    loss.backward();
    exposed_ms_ = 0;
    if (!last || calls_++ < fast_steps_) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(wait_);
    exposed_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  double exposed_allreduce_ms() override { return exposed_ms_; }

 private:
  int64_t fast_steps_, calls_ = 0;
  std::chrono::milliseconds wait_;
  double exposed_ms_ = 0;
};

TEST(TrainMonitorTest, WindowsThatDisagreeForAboutEqualTimesMakeTheRunBorderlineBetweenTheirVerdicts) {
  TrainMonitorRig rig(16);
  // steps 0-6 wait 60 ms for data (the warm-up step and the first two windows of three timed
  // steps), steps 7-12 wait 60 ms for the all-reduce (the last two windows)
  SlowAtFirstTrainData data(rig.inputs, rig.targets, 8, 7, std::chrono::milliseconds(60));
  SlowLaterAllreduceSync sync(7, std::chrono::milliseconds(60));
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 8;
  o.max_steps = 13;
  o.sync = &sync;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  std::map<std::string, int> windows;
  for (const MonitorWindow& w : monitor.windows()) ++windows[w.verdict()];
  EXPECT_EQ(windows, (std::map<std::string, int>{{"communication-bound", 2}, {"data-bound", 2}})) << j.dump(1);
  const auto& b = j["bottleneck"];
  EXPECT_EQ(b["verdict"], "borderline") << b.dump(1);
  EXPECT_EQ(b["between"].size(), 2u) << b.dump(1);
  for (const char* v : {"data-bound", "communication-bound"})
    EXPECT_NE(std::find(b["between"].begin(), b["between"].end(), v), b["between"].end()) << v;
  EXPECT_NE(b["reason"].get<std::string>().find("windows disagree"), std::string::npos) << b["reason"];
  EXPECT_NE(b["fix"].get<std::string>().find("workers"), std::string::npos) << b["fix"];
}

TEST(TrainMonitorTest, OneVerdictHoldingMostOfTheTimeIsTheRuns) {
  TrainMonitorRig rig(16);
  // steps 0-9 wait 60 ms for data (three windows), then three fast steps (a short window)
  SlowAtFirstTrainData data(rig.inputs, rig.targets, 8, 10, std::chrono::milliseconds(60));
  TrainMonitor monitor(quick_windows());
  TrainOptions o;
  o.micro_batch = 8;
  o.max_steps = 13;
  o.observer = &monitor;
  Trainer(*rig.workload, *rig.meter, data, nullptr, o).run();
  const nlohmann::json j = to_json(monitor.finish());
  EXPECT_EQ(j["bottleneck"]["verdict"], "data-bound") << j.dump(1);
}

}  // namespace
}  // namespace saturate

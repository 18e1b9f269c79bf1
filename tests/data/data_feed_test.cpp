// The loader inside the probe: trials report data_wait_ms, data_wait_fraction and workers in
// their JSON; batches have exactly the probe's size across epoch ends; a bad sample fails the
// trial and is kept for the command line; --workers auto adds workers while they help.
#include "saturate/data/data_feed.h"

#include <torch/torch.h>

#include "data/data_fixtures.h"
#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/memory_meter.h"
#include "saturate/probe/probe.h"
#include "saturate/report/report.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

struct FeedRig {
  FeedRig() {
    ModelSpec s;
    s.name = "mlp";
    s.input_shape = {1, 4, 4};
    s.width = 32;
    s.layers = 1;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kSgd);
    meter->set_budget_bytes(256 << 20);
    probe = std::make_unique<Probe>(*workload, *meter);
  }
  ~FeedRig() { set_cpu_budget_bytes(0); }
  DataFeed& attach(std::shared_ptr<Dataset> ds, int workers, bool shuffle = true) {
    LoaderOptions o;
    o.workers = workers;
    o.shape = {1, 4, 4};
    o.shard.shuffle = shuffle;
    feed = std::make_unique<DataFeed>(std::move(ds), o, torch::kCPU);
    probe->set_batch_source(feed.get());
    probe->add_observer(feed.get());
    return *feed;
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  std::unique_ptr<Probe> probe;
  std::unique_ptr<DataFeed> feed;
};

LoaderOptions stub_options(int workers) {
  LoaderOptions o;
  o.workers = workers;
  o.shape = {1, 4, 4};
  return o;
}

/// Drives the feed as the probe does, with a sleep for the step's compute, so that timing
/// tests do not depend on how busy the machine's cores are.
class SleepingProbe final : public TrialRunner {
 public:
  SleepingProbe(DataFeed& feed, double compute_ms) : feed_(feed), compute_ms_(compute_ms) {}
  Trial run(int64_t batch, const TrialRequest& r) override {
    using clock = std::chrono::steady_clock;
    Trial t;
    t.batch = batch;
    feed_.trial_begin(batch);
    feed_.reset(batch);
    std::vector<double> ms;
    for (int i = 0; i < r.warmup_steps + r.measure_steps; ++i) {
      const bool measured = i >= r.warmup_steps;
      feed_.step_begin(i, measured);
      const auto start = clock::now();
      feed_.next(batch);
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(compute_ms_ * 1000)));
      if (measured) ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
      feed_.step_end(i, measured);
    }
    std::sort(ms.begin(), ms.end());
    t.status = TrialStatus::kOk;
    const size_t n = ms.size();
    t.step_time_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    t.samples_per_s = 1000.0 * static_cast<double>(batch) / t.step_time_ms;
    feed_.trial_end(t);
    return t;
  }
  int64_t budget_bytes() const override { return 0; }

 private:
  DataFeed& feed_;
  double compute_ms_;
};

}  // namespace

TEST(DataFeedTest, ProbeTrialReportsDataWaitAndWorkersInItsJson) {
  FeedRig rig;
  rig.attach(std::make_shared<StubDataset>(100), 2);
  const Trial t = rig.probe->run(16, {1, 3, 0});
  ASSERT_EQ(t.status, TrialStatus::kOk) << t.error;
  const nlohmann::json j = trial_json(t);
  EXPECT_EQ(j.at("data"), "stub");
  EXPECT_EQ(j.at("workers"), 2);
  EXPECT_EQ(j.at("prefetch"), 2);
  EXPECT_GE(j.at("data_wait_ms").get<double>(), 0.0);
  const double f = j.at("data_wait_fraction").get<double>();
  EXPECT_GE(f, 0.0);
  EXPECT_LE(f, 1.0);
  EXPECT_EQ(j.at("data_skipped_samples"), 0);
}

TEST(DataFeedTest, SlowDataShowsAsWaitOnTheStep) {
  auto ds = std::make_shared<StubDataset>(200);
  ds->on_get = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(3)); };
  DataFeed feed(ds, stub_options(1), torch::kCPU);
  SleepingProbe probe(feed, 2.0);
  const Trial t = probe.run(8, {1, 3, 0});  // 24 ms of loading per 2 ms step
  ASSERT_TRUE(t.findings.data);
  EXPECT_GT(t.findings.data->wait_fraction, 0.5);
  EXPECT_GT(t.findings.data->wait_ms, 10.0);
}

TEST(DataFeedTest, BatchesHaveExactlyTheRequestedSizeAcrossEpochEnds) {
  FeedRig rig;
  DataFeed& feed = rig.attach(std::make_shared<StubDataset>(10), 2, /*shuffle=*/false);
  feed.reset(4);
  std::vector<int64_t> labels;
  for (int i = 0; i < 5; ++i) {
    const Batch b = feed.next(4);
    ASSERT_EQ(b.inputs.size(0), 4);
    ASSERT_EQ(b.targets.size(0), 4);
    EXPECT_EQ(b.inputs.sizes(), (std::vector<int64_t>{4, 1, 4, 4}));
    for (int k = 0; k < 4; ++k) labels.push_back(b.targets[k].item<int64_t>());
  }
  std::vector<int64_t> expected;
  for (int e = 0; e < 2; ++e)
    for (int64_t i = 0; i < 10; ++i) expected.push_back(i);
  EXPECT_EQ(labels, expected);  // epoch 0 then epoch 1, the partial batch topped up
}

TEST(DataFeedTest, BadSampleFailsTheTrialAndIsKeptForTheCommandLine) {
  FeedRig rig;
  auto ds = std::make_shared<StubDataset>(40);
  ds->on_get = [](int64_t i) {
    if (i == 5) throw DataError("stub-file-5", 99, "bad record");
  };
  DataFeed& feed = rig.attach(ds, 2, /*shuffle=*/false);
  const Trial t = rig.probe->run(8, {1, 1, 0});
  EXPECT_EQ(t.status, TrialStatus::kError);
  EXPECT_NE(t.error.find("stub-file-5 at byte 99: sample 5 of stub: bad record"), std::string::npos) << t.error;
  ASSERT_TRUE(feed.error());
  ASSERT_THROWS_WITH(std::rethrow_exception(feed.error()), DataError, "stub-file-5 at byte 99");
  // the next trial starts afresh, and the run stays healthy
  ds->on_get = nullptr;
  EXPECT_EQ(rig.probe->run(8, {1, 1, 0}).status, TrialStatus::kOk);
  EXPECT_FALSE(feed.error());
}

TEST(DataFeedTest, AutoWorkersAddWorkersWhileTheStepWaits) {
  auto ds = std::make_shared<StubDataset>(400);
  // sleeps, not arithmetic: extra workers help even when the cores are busy (less flaky on a
  // loaded machine than decoding would be)
  ds->on_get = [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  DataFeed feed(ds, stub_options(1), torch::kCPU);
  SleepingProbe probe(feed, 5.0);
  WorkerTuningOptions o;
  o.max_workers = 3;
  o.min_gain = 0.1;
  const WorkerTuning tuning = tune_workers(probe, feed, 8, o);
  ASSERT_GE(tuning.curve.size(), 2u);
  EXPECT_GT(tuning.curve[0].data_wait_fraction, 0.3);  // one sleeping worker cannot keep up
  EXPECT_GE(tuning.workers, 2);
  EXPECT_EQ(feed.workers(), tuning.workers);
  EXPECT_GT(tuning.curve[1].samples_per_s, tuning.curve[0].samples_per_s * 1.3);
  const nlohmann::json j = tuning.to_json();
  EXPECT_EQ(j.at("workers"), tuning.workers);
  EXPECT_EQ(j.at("curve").size(), tuning.curve.size());
}

TEST(DataFeedTest, WorkerChoiceStopsAtSmallWaitNoGainOrNoCores) {
  const auto curve = [](std::vector<WorkerCurvePoint> points) {
    return [points](int w) { return points.at(static_cast<size_t>(w - 1)); };
  };
  WorkerTuningOptions o;
  o.max_workers = 8;
  // the wait falls under 2 % at 3 workers
  WorkerTuning t = choose_workers(curve({{1, 100, 10, 0.6}, {2, 180, 5, 0.2}, {3, 250, 4, 0.01}, {4, 260, 4, 0}}), o);
  EXPECT_EQ(t.workers, 3);
  EXPECT_EQ(t.curve.size(), 3u);
  EXPECT_NE(t.reason.find("under 2 %"), std::string::npos) << t.reason;
  // the fourth worker adds 1 %: keep three
  t = choose_workers(curve({{1, 100, 10, 0.6}, {2, 180, 5, 0.3}, {3, 250, 4, 0.1}, {4, 252, 4, 0.1}}), o);
  EXPECT_EQ(t.workers, 3);
  EXPECT_NE(t.reason.find("4 workers did not help"), std::string::npos) << t.reason;
  // no more cores
  o.max_workers = 2;
  t = choose_workers(curve({{1, 100, 10, 0.6}, {2, 180, 5, 0.3}}), o);
  EXPECT_EQ(t.workers, 2);
  EXPECT_NE(t.reason.find("no free cores"), std::string::npos) << t.reason;
}

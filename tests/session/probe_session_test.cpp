// `saturate probe` as a library call (session/probe_session.h) and the settings every session
// shares (session/run_options.h): an out-of-memory is a result, the loader feeds the trial when
// data is given, the timeline is kept when asked, and bad settings are refused by name.
#include "saturate/session/probe_session.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::unique_ptr<WorkloadSession> small_mlp(const std::string& budget = "") {
  WorkloadOptions o;
  o.model.name = "mlp";
  o.model.width = 64;
  o.model.layers = 2;
  o.device = "cpu";
  o.memory_budget = budget;
  return open_workload(o);
}

ProbeSessionOptions at_batch(int64_t batch) {
  ProbeSessionOptions o;
  o.batch = batch;
  o.measure_steps = 2;
  o.monitor.off = true;
  return o;
}

}  // namespace

TEST(ProbeSessionTest, AStepPastTheBudgetIsAnOutOfMemoryResultNotAThrow) {
  auto session = small_mlp("8MiB");
  const ProbeSessionResult r = run_probe_session(*session, {}, at_batch(200000));
  EXPECT_EQ(r.trial.status, TrialStatus::kOom);
  EXPECT_EQ(r.to_json(session->context)["status"], "oom");
}

TEST(ProbeSessionTest, TheTrialFitsWithItsBreakdownAndTimelineWhenAsked) {
  auto session = small_mlp();
  ProbeSessionOptions o = at_batch(16);
  o.timeline = true;
  const ProbeSessionResult r = run_probe_session(*session, {}, o);
  ASSERT_TRUE(r.trial.ok()) << r.trial.error;
  ASSERT_TRUE(r.timeline.has_value());
  EXPECT_GT(r.timeline->peak_allocated_bytes, 0);
  const nlohmann::json j = r.to_json(session->context);
  EXPECT_EQ(j["batch"], 16);
  EXPECT_TRUE(j.contains("memory_breakdown")) << j.dump();
  EXPECT_FALSE(r.data.has_value());
  EXPECT_FALSE(run_probe_session(*session, {}, at_batch(16)).timeline.has_value()) << "kept without being asked";
}

TEST(ProbeSessionTest, GivenDataTheLoaderFeedsTheTrialAndTheModelTakesItsShape) {
  WorkloadOptions w;
  w.model.name = "mlp";
  w.model.width = 32;
  w.model.layers = 1;
  w.device = "cpu";
  ProbeSessionOptions o = at_batch(8);
  o.data.data = "synthetic";
  o.data.workers = "1";
  w.model.input_shape = {1, 12, 12};
  const OpenedData data = open_data(o.data, w);
  ASSERT_TRUE(data.dataset);
  EXPECT_EQ(data.workers, 1);
  auto session = open_workload(w);
  const ProbeSessionResult r = run_probe_session(*session, data, o);
  ASSERT_TRUE(r.trial.ok()) << r.trial.error;
  ASSERT_TRUE(r.data.has_value());
  EXPECT_EQ(r.data->name, data.dataset->name());
  EXPECT_NE(r.to_text(session->context).find("data"), std::string::npos);
}

TEST(ProbeSessionTest, BadOptionsAreRefusedByName) {
  ProbeSessionOptions o = at_batch(0);
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "batch", "0 is outside 1..2147483647");
  o = at_batch(4);
  o.measure_steps = 0;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "measure_steps", "0 is outside 1..1000000");
  o = at_batch(4);
  o.step.precision = "fp8";
  EXPECT_THROW(o.check(), UsageError);
}

TEST(RunOptionsTest, OnlyASearchComparesCheckpointingOrTriesTheFastPaths) {
  StepSettings s;
  s.checkpointing = "auto";
  ASSERT_USAGE_ERROR_ABOUT(s.footprint(), "checkpointing", "unknown value 'auto'");  // a plain step cannot compare
  s.search = true;
  EXPECT_TRUE(s.compares_checkpointing());
  EXPECT_NO_THROW(s.footprint());
  s.fast_paths = "auto";
  EXPECT_FALSE(s.tries_fast_paths(/*cuda=*/false));
  EXPECT_TRUE(s.tries_fast_paths(/*cuda=*/true));
  s.fast_paths = "try";
  EXPECT_TRUE(s.tries_fast_paths(false));
  s.fast_paths = "warp_drive";
  ASSERT_USAGE_ERROR_ABOUT(s.footprint(), "fast_paths", "or auto, or try");
  WorkloadSearchOptions w;
  s.fast_paths = "auto";
  s.apply_to(w);
  EXPECT_TRUE(w.compare_checkpointing);
  EXPECT_EQ(w.fast_paths_policy, "auto");
  EXPECT_FALSE(w.fast_paths_not_tried.empty());
}

TEST(RunOptionsTest, TheMonitorIsOffOrOnTheDeviceAndATraceNeedsIt) {
  MonitorSettings m;
  ASSERT_TRUE(m.on(torch::kCPU).has_value());
  EXPECT_FALSE(m.on(torch::kCPU)->cuda);
  m.off = true;
  EXPECT_FALSE(m.on(torch::kCPU).has_value());
  m.trace = "trace.json";
  ASSERT_USAGE_ERROR_ABOUT(m.on(torch::kCPU), "", "`trace` needs the monitor");
  m.off = false;
  m.sample_hz = -1;
  ASSERT_USAGE_ERROR_ABOUT(m.on(torch::kCPU), "sample_hz", "-1 is outside 0..10000");
}

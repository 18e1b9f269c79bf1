// The Chrome trace: valid JSON with the fields viewers need, and complete events that nest on
// each thread's track (trial > step > phase), also after an out-of-memory.
#include "saturate/monitor/trace.h"

#include <fstream>
#include <map>
#include <thread>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"
#include "support/support.h"

namespace saturate {
namespace {

using saturate::testing::read_json;

/// Every "X" event on a thread lies inside or wholly outside each other one (a stack).
void expect_nested(const nlohmann::json& trace) {
  std::map<int, std::vector<std::pair<double, double>>> by_tid;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") by_tid[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  ASSERT_FALSE(by_tid.empty());
  constexpr double eps = 1e-6;
  for (auto& [tid, spans] : by_tid) {
    std::sort(spans.begin(), spans.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::pair<double, double>> stack;
    for (const auto& s : spans) {
      while (!stack.empty() && stack.back().second <= s.first + eps) stack.pop_back();
      if (!stack.empty()) {
        EXPECT_LE(s.second, stack.back().second + eps)
            << "tid " << tid << ": [" << s.first << ", " << s.second << "] overlaps [" << stack.back().first << ", "
            << stack.back().second << "]";
      }
      stack.push_back(s);
    }
  }
}

TEST(TraceTest, ProbeTraceParsesWithRequiredFieldsAndNests) {
  const std::string path = saturate::testing::temp_dir("trace") + "/probe.json";
  {
    ModelSpec s;
    s.name = "mlp";
    auto meter = make_memory_meter(torch::kCPU);
    Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdam);
    meter->set_budget_bytes(int64_t{64} << 20);
    Probe probe(w, *meter);
    MonitorOptions o;
    o.sample_hz = 50;
    o.trace_path = path;
    MonitorObserver monitor(o);
    probe.add_observer(&monitor);
    // the batch fits, its activations do not: the warm-up step ends in an OOM
    EXPECT_EQ(probe.run(4000, {1, 1, 0}).status, TrialStatus::kOom);
    EXPECT_TRUE(probe.run(4, {1, 2, 0}).ok());
    monitor.finish();
    set_cpu_budget_bytes(0);
  }
  const nlohmann::json trace = read_json(path);
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::map<std::string, int> names, phases;
  int aborted = 0;
  for (const auto& e : trace["traceEvents"]) {
    for (const char* f : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(f)) << e.dump();
    const std::string ph = e["ph"];
    if (ph == "X") {
      ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("cat")) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0);
      phases[e["cat"].get<std::string>()]++;
      if (e.contains("args") && e["args"].value("aborted", false)) ++aborted;
      names[e["name"].get<std::string>()]++;
    } else if (ph == "C") {
      ASSERT_TRUE(e.contains("ts") && e["args"].is_object()) << e.dump();
      names["counter:" + e["name"].get<std::string>()]++;
    } else {
      EXPECT_EQ(ph, "M");
    }
  }
  EXPECT_EQ(phases["trial"], 2);
  EXPECT_EQ(phases["step"], 1 + 3);  // the OOM's aborted warm-up step, then warm-up + 2 timed
  EXPECT_GE(aborted, 2);  // the step and the phase the OOM interrupted
  EXPECT_GE(names["forward"], 3);
  EXPECT_GE(names["optimizer"], 3);
  EXPECT_GE(names["counter:cpu_percent"], 2);
  EXPECT_GE(names["counter:rss_bytes"], 2);
  expect_nested(trace);
}

TEST(TraceTest, EachThreadGetsItsOwnNamedTrack) {
  TraceWriter trace;
  const auto t0 = TraceWriter::Clock::now();
  trace.complete("outer", "test", t0, t0 + std::chrono::milliseconds(10));
  trace.complete("inner", "test", t0 + std::chrono::milliseconds(2), t0 + std::chrono::milliseconds(5));
  std::thread other([&] {
    trace.name_thread("loader");
    trace.complete("overlapping", "test", t0 + std::chrono::milliseconds(4), t0 + std::chrono::milliseconds(12));
  });
  other.join();
  const nlohmann::json j = trace.to_json();
  std::set<int> tids;
  bool named = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") tids.insert(e["tid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "loader") named = true;
  }
  EXPECT_EQ(tids.size(), 2u);
  EXPECT_TRUE(named);
  expect_nested(j);
}

TEST(TraceTest, UnwritablePathIsARuntimeFailureNamingIt) {
  TraceWriter trace;
  ASSERT_THROWS_WITH(trace.write("/nonexistent/dir/trace.json"), RuntimeFailure, "`trace` /nonexistent/dir/trace.json");
}

}  // namespace
}  // namespace saturate

// The breakdown and the timeline on a hand-made allocation log of one two-step run.
#include "saturate/memory/breakdown.h"

#include "saturate/core/errors.h"
#include "saturate/memory/timeline.h"
#include "saturate/report/memory_text.h"
#include "support/support.h"

using namespace saturate;

namespace {

/// Parameters 1000 B live before the log; batch 100 B; per step: forward saves 300 B and frees a
/// 50 B temporary, backward makes a 1000 B gradient and a 200 B temporary (freed in it) and frees
/// the forward tensors; the optimizer makes 2000 B of state in step 0 and a 500 B temporary.
MemoryEventLog two_step_log() {
  MemoryEventLog log;
  log.start_allocated_bytes = 1000;
  log.source = "test";
  int64_t t = 0;
  uint64_t addr = 1;
  const auto ev = [&](MemoryEvent::Kind k, int64_t bytes, uint64_t a) {
    log.events.push_back({k, bytes, a, t += 10});
  };
  const auto mark = [&](int step, const char* phase, bool begin) {
    log.marks.push_back({log.events.size(), t += 1, step, phase, begin, true});
  };
  mark(-1, "inputs", true);
  const uint64_t batch = addr++;
  ev(MemoryEvent::kAlloc, 100, batch);
  mark(-1, "inputs", false);
  uint64_t grad = 0, state = 0;
  for (int s = 0; s < 2; ++s) {
    mark(s, "step", true);
    if (grad) ev(MemoryEvent::kFree, 1000, grad);  // zero_grad(set_to_none)
    mark(s, "forward", true);
    const uint64_t saved = addr++, tmp = addr++;
    ev(MemoryEvent::kAlloc, 300, saved);
    ev(MemoryEvent::kAlloc, 50, tmp);
    ev(MemoryEvent::kFree, 50, tmp);
    mark(s, "forward", false);
    mark(s, "backward", true);
    grad = addr++;
    const uint64_t work = addr++;
    ev(MemoryEvent::kAlloc, 1000, grad);
    ev(MemoryEvent::kAlloc, 200, work);
    ev(MemoryEvent::kFree, 200, work);
    ev(MemoryEvent::kFree, 300, saved);
    mark(s, "backward", false);
    mark(s, "optimizer", true);
    if (!state) {
      state = addr++;
      ev(MemoryEvent::kAlloc, 2000, state);
    }
    const uint64_t tmp2 = addr++;
    ev(MemoryEvent::kAlloc, 500, tmp2);
    ev(MemoryEvent::kFree, 500, tmp2);
    mark(s, "optimizer", false);
    mark(s, "step", false);
  }
  return log;
}

}  // namespace

TEST(BreakdownTest, PartsAtThePeakAreSortedByWhenTheyWereMadeAndAddUpToThePeak) {
  const MemoryEventLog log = two_step_log();
  const MemoryBreakdown b = analyze_memory(log, 1000);
  // peak: the optimizer temporary with parameters, batch, gradient and state live: 1000+100+1000+2000+500.
  EXPECT_EQ(b.peak_allocated_bytes, 4600);
  EXPECT_EQ(b.peak_step, 0);
  EXPECT_EQ(b.peak_phase, "optimizer");
  EXPECT_EQ(b.parameters_bytes, 1000);
  EXPECT_EQ(b.inputs_bytes, 100);
  EXPECT_EQ(b.gradients_bytes, 1000);
  EXPECT_EQ(b.optimizer_state_bytes, 2000);
  EXPECT_EQ(b.workspace_bytes, 500);
  EXPECT_EQ(b.activations_bytes, 0);
  EXPECT_EQ(b.other_bytes, 0);
  EXPECT_EQ(b.parts_sum_bytes(), b.peak_allocated_bytes);
  EXPECT_EQ(b.saved_for_backward_bytes, 300);
  EXPECT_EQ(b.peak_reserved_bytes, b.peak_allocated_bytes);  // no cache
  ASSERT_FALSE(b.largest_at_peak.empty());
  EXPECT_EQ(b.largest_at_peak[0].part, "optimizer_state");
  EXPECT_EQ(b.largest_at_peak[0].bytes, 2000);
}

TEST(BreakdownTest, BuffersHeldBeforeTheTrialAreOtherAndReservedAddsOverhead) {
  MemoryEventLog log = two_step_log();
  log.start_allocated_bytes = 1200;  // 200 B of buffers besides the parameters
  log.peak_reserved_bytes = 8192;
  const MemoryBreakdown b = analyze_memory(log, 1000);
  EXPECT_EQ(b.other_bytes, 200);
  EXPECT_EQ(b.parts_sum_bytes(), b.peak_allocated_bytes);
  EXPECT_EQ(b.allocator_overhead_bytes, 8192 - b.peak_allocated_bytes);
  const nlohmann::json j = to_json(b);
  for (const char* key : {"parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "inputs_bytes",
                          "activations_bytes", "workspace_bytes", "allocator_overhead_bytes", "peak_allocated_bytes",
                          "peak_reserved_bytes"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_NE(breakdown_table(b).find("exact"), std::string::npos);
}

TEST(BreakdownTest, AShardedStepsCollectiveRegionsAreCommunicationAndGatheredWeightsInsideTheirPhase) {
  // one forward of a sharded unit: the all-gather's output (800 B) and the backend's copy (800 B,
  // freed in the call) in a communication region, the weights copied out of it (800 B) in a
  // gathered_parameters region, then the output freed and an activation (100 B) made; the peak is
  // the copy-out with output and weights live
  MemoryEventLog log;
  log.start_allocated_bytes = 400;  // this rank's shard
  int64_t t = 0;
  const auto ev = [&](MemoryEvent::Kind k, int64_t bytes, uint64_t a) { log.events.push_back({k, bytes, a, t += 10}); };
  const auto mark = [&](const char* phase, bool begin) { log.marks.push_back({log.events.size(), t += 1, 0, phase, begin, true}); };
  mark("step", true);
  mark("forward", true);
  mark("communication", true);
  ev(MemoryEvent::kAlloc, 800, 1);
  ev(MemoryEvent::kAlloc, 800, 2);
  ev(MemoryEvent::kFree, 800, 2);
  mark("communication", false);
  mark("gathered_parameters", true);
  ev(MemoryEvent::kAlloc, 800, 3);
  mark("gathered_parameters", false);
  ev(MemoryEvent::kAlloc, 300, 4);  // a forward temporary at the peak
  ev(MemoryEvent::kFree, 800, 1);
  ev(MemoryEvent::kAlloc, 100, 5);
  mark("forward", false);
  mark("step", false);
  const MemoryBreakdown b = analyze_memory(log, 400);
  EXPECT_EQ(b.peak_allocated_bytes, 400 + 800 + 800 + 300);
  EXPECT_EQ(b.communication_bytes, 800);
  EXPECT_EQ(b.gathered_parameters_bytes, 800);
  EXPECT_EQ(b.activations_bytes, 300);
  EXPECT_EQ(b.workspace_bytes, 0);
  EXPECT_EQ(b.parts_sum_bytes(), b.peak_allocated_bytes);
  const nlohmann::json j = to_json(b);
  EXPECT_EQ(j["communication_bytes"], 800);
  EXPECT_EQ(j["gathered_parameters_bytes"], 800);
  EXPECT_NE(breakdown_table(b).find("communication"), std::string::npos);
  EXPECT_NE(breakdown_table(b).find("gathered weights"), std::string::npos);
}

TEST(TimelineTest, LastStepHasItsPhasesPointsAndPeak) {
  const MemoryEventLog log = two_step_log();
  const Timeline t = build_timeline(log);
  EXPECT_EQ(t.step, 1);
  ASSERT_EQ(t.phases.size(), 3u);
  EXPECT_EQ(t.phases[0].phase, "forward");
  EXPECT_EQ(t.phases[2].phase, "optimizer");
  EXPECT_EQ(t.start_bytes, 1000 + 100 + 1000 + 2000);  // step 0 left its gradient and the state
  EXPECT_EQ(t.peak_allocated_bytes, 4600);
  EXPECT_EQ(t.peak_phase, "backward");  // first reached with the backward temporary
  EXPECT_EQ(t.points.size(), 1 + 10u);  // the start and the step's ten events
  const nlohmann::json j = timeline_json(t);
  EXPECT_EQ(j["points"].size(), t.points.size());
  const std::string svg = timeline_svg(t, "test <run>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("backward"), std::string::npos);
  EXPECT_NE(svg.find("test &lt;run&gt;"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(TimelineTest, AStepThatIsNotInTheLogIsAUsageError) {
  ASSERT_THROWS_WITH(build_timeline(two_step_log(), 7), UsageError, "step 7 is not in the log");
}

// One answer per run (search/decision.h): the decision is the batch the objective chose, never
// above the memory-safe (recommended) batch; the alternatives are named and never above it
// either; an unmeasurable noise scale makes no goodput pick and no learning-rate change, and the
// fallback is named. Against the fake runner (a known memory and time law).
#include "saturate/search/decision.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "saturate/core/errors.h"

#include "search/fake_runner.h"
#include "support/support.h"

using namespace saturate;
using saturate::testing::FakeLaw;
using saturate::testing::FakeRunner;

namespace {

SearchResult searched(FakeRunner& runner) {
  SearchOptions o;
  o.target_fraction = 0.9;
  return search_batch_size(runner, o);
}

/// A noise measure whose gradient is all noise: |G|^2 estimated at or below zero.
NoiseScaleMeasurement all_noise(int64_t batch, int steps) {
  NoiseScaleMeasurement m;
  m.gradient_sq_norm = -1.0;
  m.trace_covariance = 5.0;
  m.steps = steps;
  m.batch = batch;
  m.micro_batch = batch / 2;
  return m;  // noise_scale stays empty: not measurable
}

void expect_nothing_above_the_safe_batch(const BatchDecision& d, const SearchResult& r) {
  EXPECT_LE(d.batch, r.recommended_batch);
  for (const BatchAlternative& a : d.alternatives) EXPECT_LE(a.batch, r.recommended_batch) << a.name;
}

}  // namespace

TEST(DecisionTest, WithTheMemoryObjectiveTheDecisionIsTheRecommendedBatchAndSaysWhy) {
  FakeLaw law;
  law.launch_ms = 50;
  law.per_sample_ms = 0.001;  // probes above the target run fastest
  FakeRunner runner(law);
  const SearchResult r = searched(runner);
  ASSERT_GT(r.recommended_batch, 0);
  const BatchDecision d = decide_batch(r);
  EXPECT_EQ(d.batch, r.recommended_batch);
  EXPECT_EQ(d.objective, Objective::kMemory);
  EXPECT_EQ(d.requested, Objective::kMemory);
  EXPECT_NE(d.reason.find("within 90 % of the budget"), std::string::npos) << d.reason;
  expect_nothing_above_the_safe_batch(d, r);
  const auto j = to_json(d);
  EXPECT_EQ(j["batch"], r.recommended_batch);
  EXPECT_EQ(j["objective"], "memory");
  EXPECT_EQ(decision_line(d).rfind(fmt::format("train at batch {} (objective memory)", r.recommended_batch), 0), 0u)
      << decision_line(d);
}

TEST(DecisionTest, TheThroughputKneeDecidesAndTheRecommendedBatchIsItsNamedAlternative) {
  FakeLaw law;
  law.launch_ms = 20;
  law.per_sample_ms = 0.1;  // saturates early: the knee lies well below the memory limit
  FakeRunner runner(law);
  const SearchResult r = searched(runner);
  ObjectiveOptions oo;
  oo.objective = Objective::kThroughput;
  const ObjectiveOutcome out = pick_by_objective(runner, oo, r.recommended_batch, {}, "");
  ASSERT_GT(out.batch, 0);
  ASSERT_LT(out.batch, r.recommended_batch);
  const BatchDecision d = decide_batch(r, &out);
  EXPECT_EQ(d.batch, out.batch);
  EXPECT_EQ(d.objective, Objective::kThroughput);
  EXPECT_EQ(d.reason, out.reason);
  ASSERT_EQ(d.alternatives.size(), 1u);
  EXPECT_EQ(d.alternatives[0].name, "memory");
  EXPECT_EQ(d.alternatives[0].batch, r.recommended_batch);
}

TEST(DecisionTest, AnObjectivesBatchAboveTheRecommendedOneIsCappedAndSaysSo) {
  FakeLaw law;
  FakeRunner runner(law);
  const SearchResult r = searched(runner);
  ObjectiveOutcome out;
  out.objective = out.requested = Objective::kThroughput;
  out.batch = r.max_batch;  // e.g. a curve timed up to the max, not the recommended batch
  out.reason = "fastest";
  ASSERT_GT(r.max_batch, r.recommended_batch);
  const BatchDecision d = decide_batch(r, &out);
  EXPECT_EQ(d.batch, r.recommended_batch);
  EXPECT_NE(d.reason.find("capped at the memory-safe batch"), std::string::npos) << d.reason;
  expect_nothing_above_the_safe_batch(d, r);
}

TEST(DecisionTest, AnAllNoiseGradientGivesNoGoodputPickNoLearningRateChangeAndNamesTheFallback) {
  FakeLaw law;
  law.launch_ms = 20;
  law.per_sample_ms = 0.1;
  FakeRunner runner(law);
  const SearchResult r = searched(runner);
  ObjectiveOptions oo;
  oo.objective = Objective::kGoodput;
  int noise_calls = 0;
  const ObjectiveOutcome out = pick_by_objective(
      runner, oo, r.recommended_batch,
      [&](int64_t batch, int steps) {
        ++noise_calls;
        return all_noise(batch, steps);
      },
      "noise");
  EXPECT_EQ(noise_calls, 1);
  EXPECT_FALSE(out.goodput.has_value()) << "no goodput pick from a noise scale that was not measured";
  EXPECT_EQ(out.requested, Objective::kGoodput);
  EXPECT_EQ(out.objective, Objective::kThroughput) << "the objective falls back to what it measured";
  ASSERT_TRUE(out.curve.has_value());
  EXPECT_EQ(out.batch, out.curve->knee_batch);
  EXPECT_NE(out.fallback.find("not measurable"), std::string::npos) << out.fallback;
  EXPECT_NE(out.fallback.find("no learning-rate change"), std::string::npos) << out.fallback;
  const auto j = to_json(out);
  EXPECT_FALSE(j.contains("goodput")) << "no learning-rate gain is offered";
  EXPECT_EQ(j["objective"], "throughput");
  EXPECT_EQ(j["requested"], "goodput");
  const BatchDecision d = decide_batch(r, &out);
  EXPECT_EQ(d.batch, out.batch);
  EXPECT_EQ(d.objective, Objective::kThroughput);
  EXPECT_EQ(d.requested, Objective::kGoodput);
  EXPECT_EQ(d.fallback, out.fallback);
  EXPECT_NE(decision_line(d).find("asked for goodput"), std::string::npos) << decision_line(d);
  // a saved run's decision reads back into the same typed decision (the HTML report prints it)
  const BatchDecision back = decision_from_json(to_json(d));
  EXPECT_EQ(back.batch, d.batch);
  EXPECT_EQ(back.objective, Objective::kThroughput);
  EXPECT_EQ(back.requested, Objective::kGoodput);
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.fallback, d.fallback);
  ASSERT_EQ(back.alternatives.size(), d.alternatives.size());
  ASSERT_FALSE(d.alternatives.empty());
  for (size_t i = 0; i < d.alternatives.size(); ++i) {
    EXPECT_EQ(back.alternatives[i].name, d.alternatives[i].name);
    EXPECT_EQ(back.alternatives[i].batch, d.alternatives[i].batch);
    EXPECT_EQ(back.alternatives[i].reason, d.alternatives[i].reason);
  }
}

TEST(DecisionTest, ASavedDecisionOfTheWrongShapeIsAUsageErrorNamingWhere) {
  nlohmann::json j = {{"batch", "64"}, {"objective", "memory"}, {"requested", "memory"}, {"reason", "r"}};
  ASSERT_THROWS_WITH(decision_from_json(j), UsageError, "decision.batch: expected a whole number, got string");
  j["batch"] = 64;
  j["objective"] = "fastest";
  ASSERT_THROWS_WITH(decision_from_json(j), UsageError, "decision.objective: ");
  ASSERT_THROWS_WITH(decision_from_json(j), UsageError, "fastest");
  j["objective"] = "goodput";
  j["alternatives"] = nlohmann::json::array({{{"name", "memory"}, {"batch", 48}, {"reason", "r"}}, 7});
  ASSERT_THROWS_WITH(decision_from_json(j), UsageError, "decision.alternatives[1]: expected an object, got number");
  j["alternatives"].erase(1);
  const BatchDecision d = decision_from_json(j);
  EXPECT_EQ(d.batch, 64);
  EXPECT_EQ(d.objective, Objective::kGoodput);
  ASSERT_EQ(d.alternatives.size(), 1u);
  EXPECT_EQ(d.alternatives[0].batch, 48);
}

TEST(DecisionTest, WhenNoBatchMeetsTheTargetThereIsNoDecisionAndNothingClaimsToBeExact) {
  FakeLaw law;
  law.fixed_bytes = 3000ll << 20;  // the fixed cost alone is above 0.7 of the 4 GiB budget
  FakeRunner runner(law);
  SearchOptions o;
  o.target_fraction = 0.7;
  const SearchResult r = search_batch_size(runner, o);
  ASSERT_GT(r.max_batch, 0);
  EXPECT_EQ(r.recommended_batch, 0);
  EXPECT_FALSE(r.recommended_exact) << "recommended_batch 0 is not an exact answer";
  EXPECT_EQ(r.throughput_batch, 0);
  const BatchDecision d = decide_batch(r);
  EXPECT_EQ(d.batch, 0);
  EXPECT_TRUE(d.alternatives.empty());
  EXPECT_NE(d.reason.find("no batch keeps its measured peak within the target"), std::string::npos) << d.reason;
}

// `saturate search` as a library call (session/search_session.h): the answer with its JSON and
// notes, the failure said in words when there is no answer (naming options, not flags), and
// `plan_for`'s options refused by name before any work.
#include "saturate/session/search_session.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::unique_ptr<WorkloadSession> mlp_within(const std::string& budget, int64_t width = 64) {
  WorkloadOptions o;
  o.model.name = "mlp";
  o.model.width = width;
  o.model.layers = 2;
  o.device = "cpu";
  o.memory_budget = budget;
  auto s = open_workload(o);
  s->context.command = "search";
  return s;
}

SearchSessionOptions capped(int64_t max_batch) {
  SearchSessionOptions o;
  o.search.search.max_batch = max_batch;
  o.search.search.measure_steps = 1;
  return o;
}

}  // namespace

TEST(SearchSessionTest, TheAnswerComesWithItsJsonBreakdownAndNotes) {
  auto session = mlp_within("24MiB");
  const SearchSessionResult r = run_search_session(*session, {}, capped(256), nullptr);
  EXPECT_EQ(r.failure, "");
  const SearchResult& s = r.found.search();
  EXPECT_GT(s.recommended_batch, 0);
  const nlohmann::json j = r.to_json(session->context);
  EXPECT_EQ(j["recommended_batch"], s.recommended_batch);
  EXPECT_TRUE(j.contains("memory_breakdown")) << j.dump();
  EXPECT_FALSE(r.plan.has_value());
  EXPECT_FALSE(r.data.has_value());
  EXPECT_EQ(j["command"], "search");
}

TEST(SearchSessionTest, BatchOneTooLargeIsAFailureThatSaysWhatItNeeds) {
  // 512 wide: weights, gradients and Adam's state (10.2 MiB) fit 0.9 of 12 MiB, a step at batch 1 does not.
  auto session = mlp_within("12MiB", 512);
  const SearchSessionResult r = run_search_session(*session, {}, capped(64), nullptr);
  EXPECT_EQ(r.found.search().max_batch, 0);
  EXPECT_NE(r.failure.find("batch 1 does not fit in `memory_budget` 12.0 MiB"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("needs"), std::string::npos) << r.failure;
}

TEST(SearchSessionTest, ABudgetBelowTheFixedCostIsAUsageErrorBeforeAnyTrial) {
  auto session = mlp_within("3MiB", 512);  // the weights fit, weights + gradients + Adam's state do not
  ASSERT_USAGE_ERROR_ABOUT(run_search_session(*session, {}, capped(64), nullptr), "memory_budget", "fixed cost");
}

TEST(SearchSessionTest, ATargetBelowTheFixedCostIsAUsageErrorNamingTheFractionNeeded) {
  auto session = mlp_within("24MiB");
  SearchSessionOptions o = capped(256);
  o.search.search.target_fraction = 0.01;
  ASSERT_USAGE_ERROR_ABOUT(run_search_session(*session, {}, o, nullptr), "target_fraction", "above 0.04");
}

TEST(SearchSessionTest, NoBatchWithinTheTargetIsAFailureNamingTheFractionThatWouldFit) {
  auto session = mlp_within("24MiB");
  SearchSessionOptions o = capped(256);
  o.search.search.target_fraction = 0.04;  // above the fixed cost, below any step's peak
  const SearchSessionResult r = run_search_session(*session, {}, o, nullptr);
  EXPECT_GT(r.found.search().max_batch, 0);
  EXPECT_EQ(r.found.search().recommended_batch, 0);
  EXPECT_NE(r.failure.find("within `target_fraction` 0.04"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("to at least 0."), std::string::npos) << r.failure;
  EXPECT_EQ(r.failure.find("(e.g. 0.9)"), std::string::npos) << r.failure;
}

TEST(SearchSessionTest, PlanForOptionsAreRefusedByName) {
  PlanForOptions p;
  p.plan_only = true;
  ASSERT_USAGE_ERROR_ABOUT(p.check(), "plan_only", "needs `plan_for`");
  p.plan_for = "tpu-v9";
  EXPECT_THROW(p.check(), UsageError);
  p.plan_for = "h100-80gb";
  p.plan_batches = "8";
  EXPECT_THROW(p.check(), UsageError);
  p.plan_batches = "4,8";
  EXPECT_NO_THROW(p.check());
}

TEST(SearchSessionTest, TheTrialsDataIsNamedSyntheticWithoutData) {
  EXPECT_NE(trial_data_name({}).find("synthetic"), std::string::npos);
}

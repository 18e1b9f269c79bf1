// The search session on a user's own step (session/user_search.h), the one Python's
// saturate.search and a C++ caller use: options refused by name before the step runs, the
// answer exact when checked by running the step alone under the same budget, the budget put
// back, the objective's batch the one to train at, and the leak loop over the same step.
#include "saturate/session/user_search.h"

#include <vector>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/memory/leak_check.h"
#include "support/support.h"

using namespace saturate;

namespace {

using saturate::testing::kMiB;

/// A step whose memory grows with the batch: a [b, 4096] activation through two matrices.
struct Loop {
  torch::Tensor w1 = torch::randn({4096, 256}).requires_grad_(true);
  torch::Tensor w2 = torch::randn({256, 10}).requires_grad_(true);
  std::vector<torch::Tensor> kept;  ///< what a leaking loop keeps
  bool leak = false;
  void operator()(int64_t b) {
    auto x = torch::randn({b, 4096});
    auto out = torch::relu(x.mm(w1)).mm(w2);
    if (leak) kept.push_back(out.detach().clone());
    out.sum().backward();
    w1.mutable_grad() = torch::Tensor();
    w2.mutable_grad() = torch::Tensor();
  }
  std::vector<torch::Tensor> parameters() const { return {w1, w2}; }
  /// This loop as the probe's step (its weights the resident parameters).
  UserTrialStep step() {
    UserStepOptions so;
    so.parameters = parameters();
    return UserTrialStep([this](int64_t b) { (*this)(b); }, so);
  }
};

/// Whether `loop` runs 3 steps at `b` under `budget` bytes, by itself (no probe).
bool runs_alone(Loop& loop, int64_t b, int64_t budget) {
  set_cpu_budget_bytes(budget);
  bool ok = true;
  try {
    for (int i = 0; i < 3; ++i) loop(b);
  } catch (const c10::OutOfMemoryError&) {
    ok = false;
  }
  set_cpu_budget_bytes(0);
  return ok;
}

}  // namespace

TEST(UserSearchSession, EveryOptionOutOfRangeIsRefusedByNameBeforeTheStepRuns) {
  int calls = 0;
  UserTrialStep step([&](int64_t) { ++calls; }, {});
  auto meter = make_memory_meter(torch::kCPU);
  const std::vector<std::pair<std::string, UserSearchOptions>> bad = {
      {"budget_bytes", [] { UserSearchOptions o; o.budget_bytes = -1; return o; }()},
      {"measure_steps", [] { UserSearchOptions o; o.budget_bytes = kMiB; o.search.measure_steps = 0; return o; }()},
      {"knee_fraction", [] { UserSearchOptions o; o.budget_bytes = kMiB; o.objective.knee_fraction = 2; return o; }()},
      {"objective", [] { UserSearchOptions o; o.budget_bytes = kMiB; o.objective.objective = Objective::kGoodput;
                         return o; }()}};  // goodput without a way to read the step's gradients
  for (const auto& [option, o] : bad) {
    try {
      run_user_search(step, *meter, o);
      ADD_FAILURE() << option << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(e.option(), option) << e.what();
    }
  }
  EXPECT_EQ(calls, 0);
}

TEST(UserSearchSession, TheMaxIsExactWhenTheStepRunsAloneUnderTheSameBudgetAndTheBudgetIsPutBack) {
  ASSERT_TRUE(cpu_budget_allocator_installed());
  torch::manual_seed(0);
  Loop loop;
  UserTrialStep step = loop.step();
  auto meter = make_memory_meter(torch::kCPU);
  const int64_t before = cpu_memory_counters().budget_bytes;
  UserSearchOptions o;
  o.budget_bytes = 48 * kMiB;
  const UserSearchResult r = run_user_search(step, *meter, o);
  EXPECT_EQ(cpu_memory_counters().budget_bytes, before) << "the session's budget does not outlive it";
  ASSERT_TRUE(r.search.error.empty()) << r.search.error;
  ASSERT_TRUE(r.search.max_batch_exact);
  ASSERT_GT(r.search.max_batch, 100);
  EXPECT_EQ(r.batch(), r.search.recommended_batch);  // the memory objective: the recommended batch
  EXPECT_TRUE(runs_alone(loop, r.search.max_batch, 48 * kMiB));
  EXPECT_FALSE(runs_alone(loop, r.search.max_batch + 1, 48 * kMiB));
  const nlohmann::json j = r.to_json(RunContext{});
  EXPECT_EQ(j["max_batch"], r.search.max_batch);
  EXPECT_TRUE(j.contains("compute"));
  EXPECT_FALSE(j.contains("objective"));
  EXPECT_NE(r.to_text(RunContext{}).find("max_batch"), std::string::npos);
}

TEST(UserSearchSession, TheThroughputObjectiveChoosesATimedBatchNoLargerThanTheRecommended) {
  torch::manual_seed(0);
  Loop loop;
  UserTrialStep step = loop.step();
  auto meter = make_memory_meter(torch::kCPU);
  UserSearchOptions o;
  o.budget_bytes = 24 * kMiB;
  o.objective.objective = Objective::kThroughput;
  const UserSearchResult r = run_user_search(step, *meter, o);
  ASSERT_TRUE(r.objective.curve.has_value());
  bool timed = false;
  for (const auto& p : r.objective.curve->points) timed = timed || (p.ok && p.batch == r.batch());
  EXPECT_TRUE(timed) << "the chosen batch is a point of the curve";
  EXPECT_LE(r.batch(), r.search.recommended_batch);
  EXPECT_EQ(r.to_json(RunContext{})["objective"]["objective"], "throughput");
}

TEST(LeakLoop, AStepThatKeepsItsOutputsLeaksAndOneThatDoesNotIsFlat) {
  for (const bool leak : {true, false}) {
    torch::manual_seed(0);
    Loop loop;
    loop.leak = leak;
    auto meter = make_memory_meter(torch::kCPU);
    LeakLoopOptions o;
    o.steps = 12;
    const LeakCheckResult r = run_leak_loop([&](int, bool) { loop(64); }, *meter, o);
    EXPECT_EQ(r.report.detected, leak);
    if (leak) {
      EXPECT_NEAR(r.report.bytes_per_step, 64 * 10 * 4, 64 * 10 * 4 * 0.25);
      ASSERT_FALSE(r.sites.empty());
      EXPECT_NE(r.sites[0].site.find("clone"), std::string::npos) << r.sites[0].site;  // the operator that made it
    }
  }
  EXPECT_THROW(run_leak_loop([](int, bool) {}, *make_memory_meter(torch::kCPU), [] {
                 LeakLoopOptions o;
                 o.steps = 0;
                 return o;
               }()),
               UsageError);
}

// Planning on the CPU, checked by running: predict the largest batch for a CPU budget from two
// small recorded batches, then run that batch under the budget (it fits) and a batch 2 % larger
// (it does not); the predicted peak is within 2 % of the measured one.
#include "saturate/memory/plan_runner.h"

#include <cmath>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

void check_plan_by_running(ModelSpec s, int64_t budget, int64_t a, int64_t b) {
  auto meter = make_memory_meter(torch::kCPU);
  Workload w(build_model(s), torch::kCPU, OptimizerKind::kAdam);
  meter->set_budget_bytes(int64_t{2} << 30);
  PlanRunOptions o;
  o.target = {"cpu budget", budget};
  o.allocator = AllocatorKind::kExact;
  o.target_fraction = 1.0;
  o.batch_a = a;
  o.batch_b = b;
  const PlanResult p = plan_from_run(w, *meter, o);
  ASSERT_GT(p.max_batch, b) << s.name;
  Probe probe(w, *meter);
  const Trial fit = probe.run(p.max_batch, {1, 1, budget});
  EXPECT_TRUE(fit.ok()) << s.name << " batch " << p.max_batch << ": " << fit.error;
  EXPECT_NEAR(static_cast<double>(p.predicted_max_peak_bytes), static_cast<double>(fit.peak_allocated_bytes),
              0.02 * static_cast<double>(fit.peak_allocated_bytes))
      << s.name;
  const int64_t over = static_cast<int64_t>(std::ceil(p.max_batch * 1.02)) + 1;
  const Trial no = probe.run(over, {1, 1, budget});
  EXPECT_EQ(no.status, TrialStatus::kOom) << s.name << " batch " << over;
  meter->set_budget_bytes(0);
}

}  // namespace

TEST(PlanRunnerTest, MlpMaxBatchPredictedForACpuBudgetFitsAndTwoPercentMoreDoesNot) {
  ModelSpec s;
  s.name = "mlp";
  s.width = 256;
  check_plan_by_running(s, 48 << 20, 4, 8);
}

TEST(PlanRunnerTest, ConvnetMaxBatchPredictedForACpuBudgetFitsAndTwoPercentMoreDoesNot) {
  ModelSpec s;
  s.name = "convnet";
  check_plan_by_running(s, 64 << 20, 4, 8);
}

TEST(PlanRunnerTest, PlanBatchesParseAsTwoDistinctPositiveNumbers) {
  EXPECT_EQ(parse_plan_batches("8,4"), std::make_pair(int64_t{4}, int64_t{8}));
  ASSERT_THROWS_WITH(parse_plan_batches("4"), UsageError, "two distinct positive batches");
  ASSERT_THROWS_WITH(parse_plan_batches("4,4"), UsageError, "two distinct positive batches");
  ASSERT_THROWS_WITH(parse_plan_batches("4,x"), UsageError, "two distinct positive batches");
}

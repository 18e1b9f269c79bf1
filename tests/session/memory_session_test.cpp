// `saturate memory` as a library call (session/memory_session.h): options refused by name, the
// breakdown's parameters and Adam's state as the model's own sizes say, a deliberate leak found
// and a clean step not flagged, an OOM a result rather than a throw.
#include "saturate/session/memory_session.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct MemorySessionRig {
  explicit MemorySessionRig(OptimizerKind optimizer = OptimizerKind::kAdam) {
    ModelSpec s;
    s.name = "mlp";
    s.width = 128;
    s.layers = 2;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, optimizer);
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
};

}  // namespace

TEST(MemorySessionTest, OptionsAreRefusedNamingTheOption) {
  MemorySessionOptions o;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "micro_batch", "samples per step");
  o.batch = 4;
  o.keep_loss = true;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "keep_loss", "`leak_check_steps`");
  o.keep_loss = false;
  o.warmup_steps = -1;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "warmup_steps", "negative");
}

TEST(MemorySessionTest, TheBreakdownHoldsTheModelsParametersAndAdamsTwoMoments) {
  MemorySessionRig rig;
  MemorySessionOptions o;
  o.batch = 16;
  const MemorySessionResult r = run_memory_session(*rig.workload, *rig.meter, o);
  ASSERT_TRUE(r.trial.ok()) << r.trial.error;
  const int64_t params = rig.workload->parameter_bytes();
  EXPECT_EQ(r.breakdown.parameters_bytes, params);
  EXPECT_EQ(r.breakdown.optimizer_state_bytes, 2 * params) << "Adam keeps exp_avg and exp_avg_sq";
  EXPECT_FALSE(r.leak.has_value());
  const nlohmann::json j = r.to_json(RunContext{});
  EXPECT_FALSE(j.at("timeline").contains("points")) << "the points go to a timeline file";
  EXPECT_NE(r.to_text(RunContext{}).find("optimizer state"), std::string::npos);
}

TEST(MemorySessionTest, AKeptLossGraphIsALeakAndAPlainStepIsNot) {
  MemorySessionOptions o;
  o.batch = 32;
  o.leak_check_steps = 10;
  MemorySessionRig clean;
  const MemorySessionResult flat = run_memory_session(*clean.workload, *clean.meter, o);
  ASSERT_TRUE(flat.leak.has_value());
  EXPECT_FALSE(flat.leak->report.detected);
  o.keep_loss = true;
  MemorySessionRig leaky;
  const MemorySessionResult grows = run_memory_session(*leaky.workload, *leaky.meter, o);
  ASSERT_TRUE(grows.leak.has_value());
  EXPECT_TRUE(grows.leak->report.detected);
  EXPECT_EQ(grows.to_json(RunContext{}).at("leak").at("keep_loss"), true);
}

TEST(MemorySessionTest, AStepPastTheBudgetIsAnOutOfMemoryResult) {
  MemorySessionRig rig;
  rig.meter->set_budget_bytes(rig.meter->stats().allocated_bytes + (1 << 20));
  MemorySessionOptions o;
  o.batch = 4096;
  MemorySessionResult r;
  ASSERT_NO_THROW(r = run_memory_session(*rig.workload, *rig.meter, o));
  rig.meter->set_budget_bytes(0);
  EXPECT_EQ(r.trial.status, TrialStatus::kOom);
}

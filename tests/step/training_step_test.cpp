// The one training step: micro-batches add up to the whole batch's gradient, phases come in
// order, precision reaches the forward pass, and the step refuses what it cannot run.
#include "saturate/step/training_step.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::unique_ptr<Workload> small_mlp(OptimizerKind opt = OptimizerKind::kSgd) {
  ModelSpec s;
  s.name = "mlp";
  s.width = 32;
  s.layers = 2;
  s.seed = 3;
  return std::make_unique<Workload>(build_model(s), torch::kCPU, opt, 0.1);
}

std::vector<torch::Tensor> parameters_after_one_step(int64_t micro_batch) {
  auto w = small_mlp();
  const Batch b = w->synthetic_batch(24);
  StepOptions o;
  o.micro_batch = micro_batch;
  TrainingStep step(*w, o);
  (void)step.run(b);
  std::vector<torch::Tensor> out;
  for (const auto& p : w->model().parameters()) out.push_back(p.detach().clone());
  return out;
}

struct PhaseLog final : PhaseObserver {
  std::vector<std::string> events;
  void phase_begin(Phase p) override { events.push_back("+" + to_string(p)); }
  void phase_end(Phase p) override { events.push_back("-" + to_string(p)); }
};

}  // namespace

TEST(TrainingStepTest, MicroBatchesOfAnySplitTakeTheWholeBatchsOptimizerStep) {
  const auto whole = parameters_after_one_step(0);
  for (int64_t micro : {8, 5, 1}) {  // 24 = 3 x 8; 5 leaves a last micro-batch of 4
    const auto split = parameters_after_one_step(micro);
    ASSERT_EQ(split.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i)
      EXPECT_TRUE(torch::allclose(split[i], whole[i], 1e-5, 1e-6)) << "micro " << micro << ", parameter " << i;
  }
}

TEST(TrainingStepTest, TheStepLossIsTheBatchMeanWhateverTheSplit) {
  auto w = small_mlp();
  const Batch b = w->synthetic_batch(20);
  const double expected = w->loss(w->model().forward(b.inputs), b.targets).item<double>();
  StepOptions o;
  o.micro_batch = 6;
  TrainingStep step(*w, o);
  EXPECT_NEAR(step.run(b).loss.item<double>(), expected, 1e-5);
}

TEST(TrainingStepTest, PhasesAreReportedInOrderForEachMicroBatch) {
  auto w = small_mlp();
  PhaseLog log;
  StepOptions o;
  o.micro_batch = 4;
  o.observer = &log;
  TrainingStep step(*w, o);
  (void)step.run(w->synthetic_batch(8));
  // the batch is on the device already (CPU): no copy, so no h2d phase
  const std::vector<std::string> one = {"+forward", "-forward", "+backward", "-backward"};
  std::vector<std::string> expected = one;
  expected.insert(expected.end(), one.begin(), one.end());
  expected.insert(expected.end(), {"+optimizer", "-optimizer"});
  EXPECT_EQ(log.events, expected);
}

TEST(TrainingStepTest, Bf16RunsTheForwardUnderAutocastAndKeepsFp32Parameters) {
  auto w = small_mlp();
  StepOptions o;
  o.precision = Precision::kBf16;
  TrainingStep step(*w, o);
  const Batch b = w->synthetic_batch(8);
  EXPECT_EQ(step.forward(b.inputs).scalar_type(), torch::kBFloat16);
  const StepResult r = step.run(b);
  EXPECT_TRUE(std::isfinite(r.loss.item<double>()));
  for (const auto& p : w->model().parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
}

TEST(TrainingStepTest, RetainGraphHandsBackTheLossWithItsGraph) {
  auto w = small_mlp();
  StepOptions o;
  o.retain_graph = true;
  TrainingStep step(*w, o);
  const StepResult r = step.run(w->synthetic_batch(8));
  ASSERT_TRUE(r.graph_loss.defined());
  EXPECT_NE(r.graph_loss.grad_fn(), nullptr);
  EXPECT_NO_THROW(r.graph_loss.backward());  // the graph is still there: a second backward runs
}

TEST(TrainingStepTest, Fp16OnCpuAndCheckpointingWithoutBlocksAreUsageErrors) {
  auto w = small_mlp();
  StepOptions fp16;
  fp16.precision = Precision::kFp16;
  ASSERT_THROWS_WITH(TrainingStep(*w, fp16), UsageError, "bf16");
  StepOptions negative;
  negative.micro_batch = -2;
  ASSERT_THROWS_WITH(TrainingStep(*w, negative), UsageError, "-2");
}

TEST(TrainingStepTest, ReleasingGradientsLeavesNoGradientBehind) {
  auto w = small_mlp(OptimizerKind::kAdam);
  TrainingStep step(*w, {});
  (void)step.run(w->synthetic_batch(8));
  step.release_gradients();
  for (const auto& p : w->model().parameters()) EXPECT_FALSE(p.grad().defined());
}

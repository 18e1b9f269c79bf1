// The fused optimizers compute what LibTorch's optimizers compute, keep the same state (so a
// checkpoint of one loads into the other), and run from TrainingStep when fast paths ask.
#include "saturate/step/fused_optimizer.h"

#include <torch/torch.h>

#include "saturate/step/fast_paths.h"
#include "saturate/step/training_step.h"
#include "support/support.h"

using namespace saturate;

namespace {

/// Runs `steps` optimizer steps with the same random gradients on two copies of the same
/// parameters, one per optimizer, and returns the largest difference between the copies.
template <typename Make>
double largest_difference(Make make_pair_of_optimizers, int steps) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> a, b;
  for (auto shape : {std::vector<int64_t>{7, 5}, {5}, {3, 2, 4}}) {
    a.push_back(torch::randn(shape).requires_grad_());
    b.push_back(a.back().detach().clone().requires_grad_());
  }
  auto [reference, fused] = make_pair_of_optimizers(a, b);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < a.size(); ++i) {
      const auto g = torch::randn(a[i].sizes());
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    reference->step();
    fused->step();
  }
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

}  // namespace

TEST(FusedOptimizerTest, FusedAdamWTakesTheStepsOfAdamW) {
  const double diff = largest_difference(
      [](auto& a, auto& b) {
        const auto o = torch::optim::AdamWOptions(1e-2).weight_decay(0.01);
        return std::pair{std::make_unique<torch::optim::AdamW>(a, o), std::make_unique<FusedAdamW>(b, o)};
      },
      6);
  EXPECT_LT(diff, 1e-6);
}

TEST(FusedOptimizerTest, FusedAdamTakesTheStepsOfAdam) {
  const double diff = largest_difference(
      [](auto& a, auto& b) {
        const auto o = torch::optim::AdamOptions(1e-2);
        return std::pair{std::make_unique<torch::optim::Adam>(a, o), std::make_unique<FusedAdam>(b, o)};
      },
      6);
  EXPECT_LT(diff, 1e-6);
}

TEST(FusedOptimizerTest, FusedSgdWithMomentumTakesTheStepsOfSgd) {
  const double diff = largest_difference(
      [](auto& a, auto& b) {
        const auto o = torch::optim::SGDOptions(0.05).momentum(0.9);
        return std::pair{std::make_unique<torch::optim::SGD>(a, o), std::make_unique<FusedSGD>(b, o)};
      },
      6);
  EXPECT_LT(diff, 1e-6);
}

TEST(FusedOptimizerTest, FusedAdamWKeepsAdamWsStateSoCheckpointsLoadIntoEither) {
  auto p = torch::randn({4, 4}).requires_grad_();
  FusedAdamW fused({p}, torch::optim::AdamWOptions(1e-3));
  for (int s = 0; s < 3; ++s) {
    p.mutable_grad() = torch::ones({4, 4});
    fused.step();
  }
  const auto& state = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(p.unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 3);
  ASSERT_TRUE(state.exp_avg().defined());
  // a gradient of ones: exp_avg = 1 - 0.9^3 after three steps
  EXPECT_NEAR(state.exp_avg()[0][0].item<double>(), 1 - std::pow(0.9, 3), 1e-6);
  // the serialized state loads into LibTorch's AdamW
  std::stringstream bytes;
  {
    torch::serialize::OutputArchive out;
    fused.save(out);
    out.save_to(bytes);
  }
  auto q = p.detach().clone().requires_grad_();
  torch::optim::AdamW plain({q}, torch::optim::AdamWOptions(1e-3));
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  plain.load(in);
  const auto& loaded = static_cast<torch::optim::AdamWParamState&>(*plain.state().at(q.unsafeGetTensorImpl()));
  EXPECT_EQ(loaded.step(), 3);
  EXPECT_TRUE(torch::equal(loaded.exp_avg_sq(), state.exp_avg_sq()));
}

TEST(FusedOptimizerTest, ATrainingStepWithTheFusedOptimizerLearnsAsThePlainOne) {
  std::vector<std::vector<double>> losses(2);
  for (int fused = 0; fused < 2; ++fused) {
    ModelSpec s;
    s.name = "mlp";
    s.width = 32;
    s.seed = 5;
    Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdamW, 1e-3);
    StepOptions o;
    o.fast_paths.fused_optimizer = fused == 1;
    TrainingStep step(w, o);
    EXPECT_EQ(dynamic_cast<FusedAdamW*>(&step.optimizer()) != nullptr, fused == 1);
    torch::manual_seed(11);
    const Batch b = w.synthetic_batch(16);
    for (int i = 0; i < 5; ++i) losses[fused].push_back(step.run(b).loss.item<double>());
  }
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_NEAR(losses[0][i], losses[1][i], 1e-5) << "step " << i;
  EXPECT_LT(losses[1].back(), losses[1].front());  // it learns the batch
}

#include "saturate/step/grad_scaler.h"

#include <torch/torch.h>

#include "support/support.h"

using namespace saturate;

namespace {
struct Net {
  torch::Tensor w = torch::ones({4}, torch::requires_grad());
  torch::optim::SGD opt{std::vector<torch::Tensor>{w}, torch::optim::SGDOptions(0.1)};
  void backward(GradScaler& s, double value) {
    opt.zero_grad();
    s.scale((w * value).sum()).backward();
  }
};
}  // namespace

TEST(GradScalerTest, ScalesTheLossAndUnscalesGradientsBeforeTheStep) {
  GradScalerOptions o;
  o.init_scale = 1024;
  GradScaler s(o);
  Net n;
  n.backward(s, 2.0);
  EXPECT_FLOAT_EQ(n.w.grad()[0].item<float>(), 2048.f);
  s.unscale(n.opt);
  EXPECT_FLOAT_EQ(n.w.grad()[0].item<float>(), 2.f);
  EXPECT_TRUE(s.step(n.opt));
  EXPECT_FLOAT_EQ(n.w[0].item<float>(), 1.f - 0.1f * 2.f);
  s.update();
}

TEST(GradScalerTest, ForcedOverflowSkipsTheStepAndHalvesTheScale) {
  GradScalerOptions o;
  o.init_scale = 1024;
  GradScaler s(o);
  Net n;
  n.backward(s, 1.0);
  n.w.mutable_grad()[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.step(n.opt));
  EXPECT_TRUE(torch::equal(n.w, torch::ones({4})));  // untouched
  s.update();
  EXPECT_DOUBLE_EQ(s.scale_value(), 512);
}

TEST(GradScalerTest, ScaleGrowsAfterTheGrowthInterval) {
  GradScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 3;
  GradScaler s(o);
  Net n;
  for (int i = 0; i < 2; ++i) {
    n.backward(s, 1.0);
    s.step(n.opt);
    s.update();
    EXPECT_DOUBLE_EQ(s.scale_value(), 8);
  }
  n.backward(s, 1.0);
  s.step(n.opt);
  s.update();
  EXPECT_DOUBLE_EQ(s.scale_value(), 16);
  EXPECT_EQ(s.growth_tracker(), 0);
}

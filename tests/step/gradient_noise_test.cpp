// The gradient noise scale: the estimators recover a known gradient and noise, and on real
// models and real data the cheap two-batch estimate agrees with a brute-force one (the variance
// of many small-batch gradients around the full gradient at a fixed point).
#include "saturate/step/gradient_noise.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/models/zoo.h"
#include "saturate/step/training_step.h"
#include "support/fashion.h"
#include "support/support.h"

using namespace saturate;

namespace {

TEST(GradientNoiseScale, RecoversTheNoiseScaleOfAKnownGradientAndPerSampleNoise) {
  // per-sample gradients G + e, e ~ N(0, sigma^2 I_d): tr(Sigma) = d sigma^2, B_simple = d sigma^2 / |G|^2
  torch::manual_seed(7);
  const int64_t d = 400, b = 8, B = 32;
  const double sigma = 0.5;
  const torch::Tensor G = torch::full({d}, 1.0 / std::sqrt(static_cast<double>(d)), torch::kDouble);  // |G| = 1
  GradientNoiseScale noise(0.999);
  for (int step = 0; step < 3000; ++step) {
    const torch::Tensor samples = G + sigma * torch::randn({B, d}, torch::kDouble);
    const double small = samples.slice(0, 0, b).mean(0).pow(2).sum().item<double>();
    const double big = samples.mean(0).pow(2).sum().item<double>();
    noise.add(b, small, B, big);
  }
  const double truth = static_cast<double>(d) * sigma * sigma;  // 100 samples
  ASSERT_TRUE(noise.noise_scale().has_value());
  EXPECT_NEAR(*noise.noise_scale(), truth, 0.08 * truth);
  EXPECT_NEAR(noise.gradient_sq_norm(), 1.0, 0.08);
  EXPECT_NEAR(noise.trace_covariance(), truth, 0.08 * truth);
}

TEST(GradientNoiseScale, IsUnknownBeforeAMeasurementAndWhileTheGradientLooksLikeNoiseOnly) {
  GradientNoiseScale noise;
  EXPECT_FALSE(noise.noise_scale().has_value());
  // the big batch's norm fell by more than noise alone explains: |G|^2 estimate negative
  noise.add(1, 10.0, 2, 4.0);
  EXPECT_FALSE(noise.noise_scale().has_value());
  EXPECT_LT(noise.gradient_sq_norm(), 0);
}

TEST(GradientNoiseScale, RefusesBatchesThatAreNotSmallThenBigAndADecayOutsideItsRange) {
  GradientNoiseScale noise;
  EXPECT_THROW(noise.add(8, 1.0, 8, 1.0), UsageError);
  EXPECT_THROW(noise.add(0, 1.0, 8, 1.0), UsageError);
  EXPECT_THROW(GradientNoiseScale(1.0), UsageError);
  EXPECT_THROW(GradientNoiseScale(-0.1), UsageError);
  noise.add(4, std::nan(""), 8, 1.0);  // an fp16 step with overflowing gradients: ignored
  EXPECT_EQ(noise.measurements(), 0);
}

TEST(GradientNoiseScale, ContinuesExactlyFromItsSavedState) {
  GradientNoiseScale a(0.9), b(0.5);
  a.add(4, 3.0, 16, 1.5);
  a.add(4, 2.5, 16, 1.2);
  b.load_state(a.state());
  a.add(4, 2.9, 16, 1.4);
  b.add(4, 2.9, 16, 1.4);
  ASSERT_TRUE(a.noise_scale() && b.noise_scale());
  EXPECT_DOUBLE_EQ(*a.noise_scale(), *b.noise_scale());
  EXPECT_EQ(a.measurements(), 3);
  EXPECT_EQ(b.measurements(), 3);
  EXPECT_THROW(b.load_state({0.9, 1.0}), UsageError);
}

// ---- real models, real data ----

using Pool = saturate::testing::TensorPool;
using saturate::testing::fashion_pool;

std::unique_ptr<Workload> fashion_model(const std::string& name, const torch::Device& device = torch::kCPU) {
  ModelSpec s;
  s.name = name;
  s.input_shape = {1, 28, 28};
  s.classes = 10;
  s.seed = 11;
  if (name == "mlp") {
    s.width = 128;
    s.layers = 2;
  }
  return std::make_unique<Workload>(build_model(s), device, OptimizerKind::kSgd, 0.1);
}

/// The mean gradient over `inputs` (a flat vector), at the model's weights.
torch::Tensor flat_gradient(Workload& w, const torch::Tensor& inputs, const torch::Tensor& targets) {
  for (auto& p : w.model().parameters()) p.mutable_grad() = torch::Tensor();
  w.loss(w.model().forward(inputs), targets).backward();
  std::vector<torch::Tensor> parts;
  for (auto& p : w.model().parameters())
    parts.push_back(p.grad().defined() ? p.grad().flatten().to(torch::kDouble) : torch::zeros({p.numel()}, torch::kDouble));
  for (auto& p : w.model().parameters()) p.mutable_grad() = torch::Tensor();
  return torch::cat(parts);
}

/// Brute force at the model's current weights: G over the whole pool (in chunks of `b`, as
/// BatchNorm sees batches of b), tr(Sigma) = b x mean |g_b - G|^2 over every chunk of several
/// random orders of the pool.
double brute_force_noise_scale(Workload& w, const Pool& pool, int64_t b, int orders) {
  const int64_t n = pool.inputs.size(0);
  std::vector<torch::Tensor> grads;
  torch::manual_seed(123);
  for (int o = 0; o < orders; ++o) {
    const torch::Tensor perm = torch::randperm(n);
    for (int64_t s = 0; s + b <= n; s += b) {
      const torch::Tensor idx = perm.slice(0, s, s + b);
      grads.push_back(flat_gradient(w, pool.inputs.index_select(0, idx), pool.targets.index_select(0, idx)));
    }
  }
  const torch::Tensor all = torch::stack(grads);
  const torch::Tensor G = all.mean(0);  // every sample equally often: the pool's gradient
  const double g2 = G.pow(2).sum().item<double>();
  const double trace = static_cast<double>(b) * (all - G).pow(2).sum(1).mean().item<double>();
  return trace / g2;
}

double estimated_noise_scale(Workload& w, const Pool& pool, int64_t B, int64_t b, int steps, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto next = [&](int64_t batch) {
    const torch::Tensor idx = torch::randperm(pool.inputs.size(0), gen).slice(0, 0, batch);
    return Batch{pool.inputs.index_select(0, idx), pool.targets.index_select(0, idx)};
  };
  StepOptions so;
  const NoiseScaleMeasurement m = measure_noise_scale(w, so, next, B, b, steps, 0.99);
  EXPECT_EQ(m.steps, steps);
  EXPECT_EQ(m.batch, B);
  EXPECT_EQ(m.micro_batch, b);
  return m.noise_scale.value_or(-1);
}

void agrees_with_brute_force(const std::string& model, int steps, double tolerance) {
  const auto pool = fashion_pool(1024);
  auto w = fashion_model(model);
  const int64_t b = 16;
  const double brute = brute_force_noise_scale(*w, pool, b, 4);
  std::vector<double> estimates;
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<torch::Tensor> before;
    for (auto& [name, t] : w->model().named_tensors()) before.push_back(t.clone());
    estimates.push_back(estimated_noise_scale(*w, pool, 64, b, steps, seed));
    size_t i = 0;  // the measurement leaves the model as it found it (BatchNorm statistics included)
    for (auto& [name, t] : w->model().named_tensors()) EXPECT_TRUE(torch::equal(t, before[i++])) << name;
  }
  const double lo = *std::min_element(estimates.begin(), estimates.end());
  const double hi = *std::max_element(estimates.begin(), estimates.end());
  const double mean = (estimates[0] + estimates[1] + estimates[2]) / 3;
  std::cerr << model << ": brute force " << brute << ", estimates " << estimates[0] << " " << estimates[1] << " "
            << estimates[2] << "\n";
  ASSERT_GT(brute, 0);
  for (double e : estimates) EXPECT_NEAR(e, brute, tolerance * brute) << model;
  EXPECT_LT((hi - lo) / mean, 0.20) << model;
}

TEST(GradientNoiseScale, OnAnMlpAndFashionMnistAgreesWithTheBruteForceEstimateWithin10PercentForEverySeed) {
  agrees_with_brute_force("mlp", 1000, 0.10);
}

TEST(GradientNoiseScale, OnAConvnetAndFashionMnistAgreesWithTheBruteForceEstimateWithin25PercentForEverySeed) {
  agrees_with_brute_force("convnet", 200, 0.25);
}

TEST(GradientNoiseScale, OnAGpuAgreesWithTheCpusEstimateOfTheSameModelAndBatches_CUDA) {
  SKIP_WITHOUT_CUDA();
  // no dataset on a bare GPU machine: images labelled by a fixed random teacher (learnable, so the
  // gradient is not all noise)
  torch::manual_seed(5);
  Pool pool{torch::randn({1024, 1, 28, 28}), torch::Tensor()};
  pool.targets = pool.inputs.flatten(1).matmul(torch::randn({784, 10})).argmax(1);
  auto cpu = fashion_model("mlp");
  auto gpu = fashion_model("mlp", torch::Device(torch::kCUDA, 0));  // the same weights
  const double on_cpu = estimated_noise_scale(*cpu, pool, 64, 16, 200, 1);
  const double on_gpu = estimated_noise_scale(*gpu, pool, 64, 16, 200, 1);  // host batches, copied per micro-batch
  std::cerr << "noise scale: cpu " << on_cpu << ", cuda " << on_gpu << "\n";
  EXPECT_NEAR(on_gpu, on_cpu, 0.1 * on_cpu);
}

TEST(GradientNoiseScale, ATrainingStepOfOneMicroBatchIsMeasuredAsTwoHalvesWithTheSameUpdate) {
  // the same step with and without the meter moves the weights the same way (up to summation order)
  const auto pool = fashion_pool(64);
  auto plain = fashion_model("mlp");
  auto measured = fashion_model("mlp");
  GradientNoiseScale noise;
  StepOptions a, m;
  m.noise = &noise;
  TrainingStep sa(*plain, a), sm(*measured, m);
  const Batch batch{pool.inputs, pool.targets};
  (void)sa.run(batch);
  (void)sm.run(batch);
  EXPECT_EQ(noise.measurements(), 1);
  auto pa = plain->model().parameters(), pm = measured->model().parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::allclose(pa[i], pm[i], 1e-5, 1e-6));
}

}  // namespace

// Fast paths: the list a user gives, the process-wide switches and their undoing, and
// channels_last changing the layout but not what the step computes.
#include "saturate/step/fast_paths.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/step/training_step.h"
#include "support/support.h"

using namespace saturate;

TEST(FastPathsTest, AListOfSwitchesParsesAndPrintsBack) {
  const FastPaths p = parse_fast_paths("channels_last,fused_optimizer,threads=3");
  EXPECT_TRUE(p.channels_last);
  EXPECT_TRUE(p.fused_optimizer);
  EXPECT_FALSE(p.cudnn_benchmark);
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(p.to_string(), "channels_last,fused_optimizer,threads=3");
  EXPECT_EQ(parse_fast_paths(p.to_string()), p);
  EXPECT_EQ(parse_fast_paths("none").to_string(), "none");
}

TEST(FastPathsTest, AnUnknownSwitchIsNamedWithTheAllowedOnes) {
  ASSERT_THROWS_WITH(parse_fast_paths("channels_last,turbo"), UsageError,
                     "'turbo' in 'channels_last,turbo' is not a fast path; use none or a comma-separated list of "
                     "cudnn_benchmark, tf32, channels_last, fused_optimizer, cuda_graphs, threads=N");
  ASSERT_THROWS_WITH(parse_fast_paths("threads=0"), UsageError, "threads=0: give a thread count between 1 and 4096");
  ASSERT_THROWS_WITH(parse_fast_paths("threads=2x"), UsageError, "threads=2x: give a thread count");
}

TEST(FastPathsTest, ProcessSwitchesHoldForTheirScopeAndAreUndoneAfter) {
  const int threads = at::get_num_threads();
  const bool benchmark = at::globalContext().benchmarkCuDNN();
  FastPaths p;
  p.threads = threads == 1 ? 2 : 1;
  p.cudnn_benchmark = !benchmark;
  {
    ProcessSwitches on(p);
    EXPECT_EQ(at::get_num_threads(), p.threads);
    EXPECT_EQ(at::globalContext().benchmarkCuDNN(), true);
  }
  EXPECT_EQ(at::get_num_threads(), threads);
  EXPECT_EQ(at::globalContext().benchmarkCuDNN(), benchmark);
}

TEST(FastPathsTest, ChannelsLastChangesTheLayoutButNotTheStep) {
  std::vector<std::vector<double>> losses(2);
  for (int cl = 0; cl < 2; ++cl) {
    ModelSpec s;
    s.name = "convnet";
    s.seed = 9;
    Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kSgd, 0.01);
    StepOptions o;
    o.fast_paths.channels_last = cl == 1;
    {
      TrainingStep step(w, o);
      bool any_4d = false;
      for (auto& p : w.model().parameters())
        if (p.dim() == 4) {
          any_4d = true;
          // channels innermost (stride 1) in NHWC; a weight of one input channel is both layouts
          if (p.size(1) > 1) {
            EXPECT_EQ(p.stride(1) == 1, cl == 1) << p.sizes();
          }
        }
      EXPECT_TRUE(any_4d);
      torch::manual_seed(4);
      const Batch b = w.synthetic_batch(8);
      for (int i = 0; i < 3; ++i) losses[cl].push_back(step.run(b).loss.item<double>());
    }
    // a step without the switch puts the model back
    StepOptions plain;
    TrainingStep again(w, plain);
    for (auto& p : w.model().parameters()) EXPECT_TRUE(p.is_contiguous());
  }
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_NEAR(losses[0][i], losses[1][i], 1e-4) << "step " << i;
}

TEST(FastPathsTest, TheCudaSwitchesRunAStepOnAGpu_CUDA) {
  SKIP_WITHOUT_CUDA();
  ModelSpec s;
  s.name = "convnet";
  Workload w(build_model(resolve_model_spec(s)), torch::Device(torch::kCUDA, 0), OptimizerKind::kAdamW);
  StepOptions o;
  o.fast_paths = parse_fast_paths("cudnn_benchmark,tf32,channels_last,fused_optimizer");
  ProcessSwitches on(o.fast_paths);
  TrainingStep step(w, o);
  const Batch b = w.synthetic_batch(32);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    last = step.run(b).loss.item<double>();
    if (i == 0) first = last;
  }
  EXPECT_LT(last, first);
}

TEST(FastPathsTest, CudaGraphsAreRefusedWhereAGraphCannotHoldTheStep) {
  ModelSpec s;
  s.name = "mlp";
  s.width = 16;
  Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdamW);
  StepOptions o;
  o.fast_paths.cuda_graphs = true;
  ASSERT_THROWS_WITH(TrainingStep(w, o), UsageError, "cuda_graphs needs a CUDA device");
}

TEST(FastPathsTest, TheCapturableFusedOptimizerFollowsTheLearningRateAndCountsStepsOnTheDevice) {
  // the capturable mode a graph replays: lr and step count in tensors, refreshed before each step
  torch::manual_seed(2);
  auto a = torch::randn({6, 3}).requires_grad_();
  auto b = a.detach().clone().requires_grad_();
  torch::optim::AdamW plain({a}, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
  FusedAdamW capturable({b}, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
  capturable.set_capturable(true);
  for (int s = 0; s < 5; ++s) {
    const double lr = 1e-2 / (1 + s);  // a schedule: the tensor must follow it
    plain.param_groups()[0].options().set_lr(lr);
    capturable.param_groups()[0].options().set_lr(lr);
    const auto g = torch::randn({6, 3});
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    plain.step();
    capturable.step();
  }
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-6);
  capturable.sync_host_state();
  EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*capturable.state().at(b.unsafeGetTensorImpl())).step(), 5);
}

TEST(FastPathsTest, AGraphedStepLearnsAsTheEagerStepAndIsCaptured_CUDA) {
  SKIP_WITHOUT_CUDA();
  std::vector<std::vector<double>> losses(2);
  for (int graphed = 0; graphed < 2; ++graphed) {
    ModelSpec s;
    s.name = "convnet";
    s.seed = 3;
    Workload w(build_model(resolve_model_spec(s)), torch::Device(torch::kCUDA, 0), OptimizerKind::kAdamW, 1e-3);
    StepOptions o;
    o.fast_paths.fused_optimizer = true;
    o.fast_paths.cuda_graphs = graphed == 1;
    TrainingStep step(w, o);
    torch::manual_seed(8);
    std::vector<Batch> batches;
    for (int i = 0; i < 8; ++i) batches.push_back(w.synthetic_batch(16));
    for (const Batch& b : batches) losses[graphed].push_back(step.run(b).loss.item<double>());
    if (graphed) {
      ASSERT_NE(step.graphed(), nullptr);
      EXPECT_TRUE(step.graphed()->captured()) << step.graphed()->fallback_reason();
      EXPECT_EQ(step.graphed()->fallback_reason(), "");
    }
  }
  // the same batches, the same updates: replays compute what the eager steps computed
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_NEAR(losses[0][i], losses[1][i], 1e-3) << "step " << i;
}

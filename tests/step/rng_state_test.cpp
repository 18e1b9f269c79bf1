// The generators' states a checkpoint carries: the CPU generator always, every CUDA device's
// default generator when training on CUDA (dropout on a GPU draws from it), as
// torch.cuda.get_rng_state_all() / set_rng_state_all() do in Python.
#include "saturate/step/rng_state.h"

#include <torch/torch.h>

#include "saturate/core/memory_meter.h"
#include "saturate/step/activation_checkpoint.h"
#include "saturate/train/trainer.h"
#include "support/support.h"

using namespace saturate;

namespace {

// A checkpointed segment that is only dropout: on ones, the output is the kept mask x 2 and so is
// the input's gradient, if and only if the recomputation in backward drew the same mask.
void expect_recomputed_dropout_mask_matches(const torch::Device& device) {
  const SegmentFn dropout = [](const torch::Tensor& x) { return torch::dropout(x, 0.5, /*train=*/true); };
  torch::manual_seed(5);
  const torch::Tensor x = torch::ones({4096}, torch::TensorOptions().device(device).requires_grad(true));
  const torch::Tensor out = checkpoint(dropout, x, {});
  out.sum().backward();
  EXPECT_GT(out.eq(0).sum().item<int64_t>(), 0);  // dropout did drop something
  EXPECT_TRUE(torch::equal(x.grad().cpu(), out.detach().cpu()));
}

}  // namespace

TEST(RngStateTest, RestoredCpuStateRepeatsTheSameDraws) {
  torch::manual_seed(11);
  const RngStates saved = capture_rng_states(torch::kCPU);
  EXPECT_TRUE(saved.cuda.empty());
  const torch::Tensor first = torch::rand({16});
  torch::rand({1000});
  restore_rng_states(saved);
  EXPECT_TRUE(torch::equal(torch::rand({16}), first));
}

TEST(RngStateTest, RestoredCudaStatesRepeatTheSameDraws_CUDA) {
  SKIP_WITHOUT_CUDA();
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(11);
  const RngStates saved = capture_rng_states(cuda);
  ASSERT_EQ(saved.cuda.size(), static_cast<size_t>(torch::cuda::device_count()));
  const torch::Tensor first = torch::rand({16}, cuda).cpu();
  torch::rand({1000}, cuda);
  restore_rng_states(saved);
  EXPECT_TRUE(torch::equal(torch::rand({16}, cuda).cpu(), first));
}

TEST(RngStateTest, ResumedCudaRunContinuesTheCudaGenerator_CUDA) {
  SKIP_WITHOUT_CUDA();
  const torch::Device cuda(torch::kCUDA, 0);
  const std::string dir = saturate::testing::temp_dir("rng_cuda_resume");
  torch::manual_seed(3);
  const torch::Tensor inputs = torch::randn({128, 1, 28, 28});
  const torch::Tensor targets = torch::randint(10, {128});
  const auto train = [&](bool resume) {
    ModelSpec s;
    s.name = "mlp";
    s.width = 64;
    s.layers = 2;
    auto meter = make_memory_meter(cuda);
    Workload workload(build_model(s), cuda, OptimizerKind::kSgd, 0.05);
    TensorTrainData data(inputs, targets, 64);
    TrainOptions o;
    o.micro_batch = 64;
    o.max_steps = 2;
    o.schedule.peak_lr = 0.05;
    o.checkpoint_dir = dir;
    o.resume = resume;
    if (resume) torch::cuda::manual_seed_all(999);  // another state than the checkpoint's
    Trainer(workload, *meter, data, nullptr, o).run();
  };
  train(false);  // its last checkpoint is written after the last step: what comes next is this
  const torch::Tensor next_draw = torch::rand({16}, cuda).cpu();
  train(true);   // resumes at step 2 of 2: restores the generators and runs no step
  EXPECT_TRUE(torch::equal(torch::rand({16}, cuda).cpu(), next_draw));
}

TEST(RngStateTest, CheckpointedDropoutRecomputesTheSameMask) { expect_recomputed_dropout_mask_matches(torch::kCPU); }

TEST(RngStateTest, CheckpointedDropoutRecomputesTheSameMask_CUDA) {
  SKIP_WITHOUT_CUDA();
  expect_recomputed_dropout_mask_matches(torch::Device(torch::kCUDA, 0));
}

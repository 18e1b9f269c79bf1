// A user's own torch::nn module and loss trained by the library's Trainer (models/user_model.h):
// accumulated micro-batches give the global batch's step, an out-of-memory halves the
// micro-batch and keeps the global batch, and a checkpointed run resumes bit for bit, on a
// module saturate did not build, with a loss it did not write.
#include "saturate/models/user_model.h"

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/train/trainer.h"
#include "support/support.h"

using namespace saturate;

namespace {

/// Not a saturate model: a module with a side branch, written the way a user writes one.
struct SideNetImpl : torch::nn::Module {
  SideNetImpl(int64_t hidden, bool with_norm = true)
      : a(register_module("a", torch::nn::Linear(64, hidden))),
        b(register_module("b", torch::nn::Linear(hidden, 5))),
        side(register_module("side", torch::nn::Linear(64, 5))) {
    if (with_norm) norm = register_module("norm", torch::nn::BatchNorm1d(hidden));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = a(x);
    if (norm) h = norm(h);
    return b(torch::relu(h)) + side(x);
  }
  torch::nn::Linear a, b, side;
  torch::nn::BatchNorm1d norm{nullptr};
};
TORCH_MODULE(SideNet);

struct UserRig {
  explicit UserRig(int64_t hidden = 32, bool as_double = false, bool with_norm = true) : net(hidden) {
    torch::manual_seed(11);
    net = SideNet(hidden, with_norm);
    if (as_double) net->to(torch::kDouble);
    UserModel m;
    m.name = "side net";
    m.module = net.ptr();
    m.forward = [this](const torch::Tensor& x) { return net->forward(x); };
    m.sample_shape = {64};
    m.classes = 5;
    workload = std::make_unique<Workload>(build_user_model(m), torch::kCPU, OptimizerKind::kSgd, 0.05);
    // the user's loss: cross-entropy plus a penalty on the outputs, counted
    workload->set_loss([this](const torch::Tensor& out, const torch::Tensor& y) {
      ++loss_calls;
      return torch::nn::functional::cross_entropy(out, y) + 1e-2 * out.pow(2).mean();
    });
    meter = make_memory_meter(torch::kCPU);
    const auto dtype = as_double ? torch::kDouble : torch::kFloat;
    inputs = torch::randn({1024, 64}, dtype);
    targets = torch::randint(5, {1024});
  }
  TrainResult train(TrainOptions o, int64_t global) {
    TensorTrainData data(inputs, targets, global);
    return Trainer(*workload, *meter, data, nullptr, std::move(o)).run();
  }
  std::vector<torch::Tensor> state() {
    std::vector<torch::Tensor> out;
    for (auto& [name, t] : workload->model().named_tensors()) out.push_back(t.detach().clone());
    return out;
  }
  SideNet net;
  std::unique_ptr<Workload> workload;
  std::unique_ptr<MemoryMeter> meter;
  torch::Tensor inputs, targets;
  int64_t loss_calls = 0;
};

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i], b[i], tol, tol)) << "tensor " << i;
}

}  // namespace

TEST(UserModelTrainerTest, AUserModelIsRefusedNamingTheFieldItLacks) {
  UserModel m;
  ASSERT_USAGE_ERROR_ABOUT(build_user_model(m), "module", "torch::nn module");
  SideNet net(8);
  m.module = net.ptr();
  ASSERT_USAGE_ERROR_ABOUT(build_user_model(m), "forward", "is empty");
  m.forward = [&](const torch::Tensor& x) { return net->forward(x); };
  ASSERT_USAGE_ERROR_ABOUT(build_user_model(m), "sample_shape", "{1, 28, 28}");
  m.sample_shape = {64};
  ASSERT_USAGE_ERROR_ABOUT(build_user_model(m), "classes", "below 2");
}

TEST(UserModelTrainerTest, AccumulatedMicroBatchesOfAUserModuleGiveTheGlobalBatchsStep) {
  // batch norm normalises each micro-batch alone (as PyTorch's does): a net without it here
  std::vector<std::vector<torch::Tensor>> params;
  for (auto [micro, accumulation] : {std::pair{128, 1}, {32, 4}}) {
    UserRig rig(32, /*as_double=*/true, /*with_norm=*/false);
    TrainOptions o;
    o.micro_batch = micro;
    o.accumulation = accumulation;
    o.max_steps = 2;
    o.schedule.peak_lr = 0.1;
    const TrainResult r = rig.train(o, 128);
    EXPECT_EQ(r.global_batch, 128);
    EXPECT_GE(rig.loss_calls, 2 * accumulation) << "the user's loss ran for every micro-batch";
    params.push_back(rig.state());
  }
  expect_same(params[0], params[1], 1e-9);
}

TEST(UserModelTrainerTest, AnOutOfMemoryHalvesTheUserModelsMicroBatchAndKeepsTheGlobalBatch) {
  UserRig rig(4096);  // a wide hidden layer: the activations of 1024 samples do not fit below
  const int64_t in_use = cpu_memory_counters().allocated_bytes;
  rig.meter->set_budget_bytes(in_use + (48 << 20));
  TrainOptions o;
  o.micro_batch = 1024;
  o.accumulation = 1;
  o.max_steps = 2;
  o.schedule.peak_lr = 0.05;
  TrainResult r;
  ASSERT_NO_THROW(r = rig.train(o, 1024));
  rig.meter->set_budget_bytes(0);
  ASSERT_FALSE(r.oom_backoffs.empty()) << "micro-batch 1024 should not fit in 48 MiB more than the model";
  EXPECT_LT(r.micro_batch, 1024);
  EXPECT_EQ(r.micro_batch * r.accumulation, 1024);
  EXPECT_EQ(r.global_batch, 1024);
  EXPECT_EQ(r.steps, 2);
  for (double loss : r.losses) EXPECT_TRUE(std::isfinite(loss));
}

TEST(UserModelTrainerTest, ACheckpointedUserModelResumesBitForBit) {
  const std::string dir = saturate::testing::temp_dir("user_model_resume");
  TrainOptions o;
  o.micro_batch = 32;
  o.accumulation = 2;
  o.max_steps = 6;
  o.schedule.peak_lr = 0.05;
  UserRig whole;
  whole.train(o, 64);
  const auto expected = whole.state();

  UserRig first;
  TrainOptions part = o;
  part.max_steps = 3;
  part.checkpoint_dir = dir;
  part.checkpoint_every = 3;
  first.train(part, 64);
  UserRig resumed;  // a fresh process would build the same module and resume from the files
  TrainOptions rest = o;
  rest.checkpoint_dir = dir;
  rest.resume = true;
  const TrainResult r = resumed.train(rest, 64);
  ASSERT_TRUE(r.resumed_from.has_value());
  EXPECT_EQ(*r.resumed_from, 3);
  expect_same(expected, resumed.state(), 0);
}

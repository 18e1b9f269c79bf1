// DataParallel in one process, over CPU "devices" (the code path GPUs take, with other device
// indices): the gradient of a batch split over the replicas is the gradient of the whole batch
// on one model, and training through the Trainer follows the one-model loss curve.
#include "saturate/dist/data_parallel.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/models/zoo.h"
#include "support/support.h"

namespace saturate {
namespace {

ModelSpec mlp_spec(int64_t width = 32) {
  ModelSpec s;
  s.name = "mlp";
  s.width = width;
  s.layers = 2;
  s.seed = 11;
  return resolve_model_spec(s);
}

/// The master is built with the spec's seed, replicas with other seeds (refreshed anyway).
BuiltModel data_parallel_mlp(int devices, bool as_double) {
  BuiltModel b = build_model(mlp_spec());
  if (as_double) b.model->module()->to(torch::kDouble);
  std::vector<std::unique_ptr<Model>> replicas;
  for (int i = 1; i < devices; ++i) {
    ModelSpec other = mlp_spec();
    other.seed = 100 + static_cast<uint64_t>(i);
    replicas.push_back(build_model(other).model);
    if (as_double) replicas.back()->module()->to(torch::kDouble);
  }
  b.model = std::make_unique<DataParallelModel>(std::move(b.model), std::move(replicas),
                                                std::vector<torch::Device>(static_cast<size_t>(devices), torch::kCPU));
  return b;
}

std::vector<torch::Tensor> grads(Model& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m.parameters()) g.push_back(p.grad().clone());
  return g;
}

TEST(DataParallelTest, ASplitBatchGivesTheWholeBatchsGradientOnTheMaster) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({12, 1, 28, 28}, torch::kDouble);
  const torch::Tensor y = torch::randint(10, {12});
  BuiltModel one = build_model(mlp_spec());
  one.model->module()->to(torch::kDouble);
  torch::nn::functional::cross_entropy(one.model->forward(x), y).backward();
  for (int devices : {2, 3, 5}) {
    BuiltModel dp = data_parallel_mlp(devices, /*as_double=*/true);
    auto& model = static_cast<DataParallelModel&>(*dp.model);
    torch::nn::functional::cross_entropy(model.forward(x), y).backward();
    model.reduce_gradients();
    const auto a = grads(*one.model), b = grads(model);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_TRUE(torch::allclose(a[k], b[k], 1e-12, 1e-12)) << devices << " devices, parameter " << k;
  }
}

TEST(DataParallelTest, TrainingThroughTheTrainerFollowsTheOneModelLossCurve) {
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({256, 1, 28, 28});
  const torch::Tensor y = torch::randint(10, {256});
  std::vector<std::vector<double>> curves;
  for (int devices : {1, 3}) {
    BuiltModel b = devices == 1 ? build_model(mlp_spec()) : data_parallel_mlp(devices, false);
    DataParallelModel* dp = devices == 1 ? nullptr : static_cast<DataParallelModel*>(b.model.get());
    Workload w(std::move(b), torch::kCPU, OptimizerKind::kAdam, 1e-3);
    auto meter = make_memory_meter(torch::kCPU);
    TensorTrainData data(x, y, 32);
    TrainOptions o;
    o.micro_batch = 16;
    o.accumulation = 2;
    o.max_steps = 16;
    std::unique_ptr<DataParallelSync> sync;
    if (dp) {
      sync = std::make_unique<DataParallelSync>(*dp);
      o.sync = sync.get();
    }
    Trainer t(w, *meter, data, nullptr, o);
    curves.push_back(t.run().losses);
  }
  ASSERT_EQ(curves[0].size(), 16u);
  ASSERT_EQ(curves[1].size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(curves[1][i], curves[0][i], 1e-5 * std::abs(curves[0][i])) << "step " << i;
  EXPECT_LT(curves[0].back(), curves[0].front());  // it learns
}

TEST(DataParallelTest, ABatchSmallerThanTheDevicesRunsOnTheFirstOnes) {
  BuiltModel dp = data_parallel_mlp(4, false);
  auto& model = static_cast<DataParallelModel&>(*dp.model);
  const torch::Tensor out = model.forward(torch::randn({2, 1, 28, 28}));
  EXPECT_EQ(out.size(0), 2);
  out.sum().backward();
  model.reduce_gradients();  // replicas 3 and 4 had no chunk: no gradient to add
  for (auto& p : model.parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(DataParallelTest, AReplicaOfAnotherModelIsRefusedNamingIt) {
  std::vector<std::unique_ptr<Model>> replicas;
  replicas.push_back(build_model(mlp_spec(64)).model);
  try {
    DataParallelModel m(build_model(mlp_spec(32)).model, std::move(replicas), {torch::kCPU, torch::kCPU});
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("replica 1 is not the model 'mlp'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace saturate

// The C++ OOM guard: a batch that runs out of memory under a real CPU budget is split into
// micro-batches, the update equals accumulation from the start, and memory is back where it was.
#include "train/oom_guard.h"

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct BudgetReset {
  ~BudgetReset() { set_cpu_budget_bytes(0); }
};

torch::nn::Sequential make_net() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(64, 512), torch::nn::ReLU(), torch::nn::Linear(512, 512),
                               torch::nn::ReLU(), torch::nn::Linear(512, 10));
}

Batch make_batch(int64_t rows, int64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({rows, 64}), torch::randint(10, {rows}, torch::kLong)};
}

}  // namespace

TEST(OomGuardTest, ABatchThatRunsOutOfMemoryStepsLikeAccumulationFromTheStart) {
  auto net = make_net();
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
  OomGuard guard([&](const Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.inputs), b.targets); },
                 opt);
  std::vector<Batch> batches = {make_batch(64, 1), make_batch(64, 2), make_batch(4096, 3), make_batch(64, 4)};
  std::vector<double> losses;
  std::vector<int64_t> after;
  {
    BudgetReset reset;
    // room for the model and the big batch's inputs, not for its activations at once
    set_cpu_budget_bytes(cpu_memory_counters().allocated_bytes + (24 << 20));
    for (const Batch& b : batches) {
      losses.push_back(guard.step(b));
      after.push_back(cpu_memory_counters().allocated_bytes);
    }
  }
  ASSERT_EQ(guard.memory().backoffs().size() >= 1, true) << "the big batch fit: the test shows nothing";
  EXPECT_EQ(guard.memory().backoffs().front().rows, 4096);
  EXPECT_EQ(after[2], after[1]);  // nothing of the failed attempt is left
  EXPECT_EQ(guard.last_micro_batch(), 64);  // a cheaper batch runs whole again
  // the reference: the same batches, the big one in the guard's micro-batches from the start
  auto ref = make_net();
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05));
  const int64_t micro = guard.memory().backoffs().back().new_micro_batch;
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    const int64_t rows = b.inputs.size(0);
    const int64_t m = i == 2 ? micro : rows;
    double sum = 0;
    ref_opt.zero_grad();
    for (int64_t s = 0; s < rows; s += m) {
      const int64_t n = std::min(m, rows - s);
      auto loss = torch::nn::functional::cross_entropy(ref->forward(b.inputs.slice(0, s, s + n)), b.targets.slice(0, s, s + n)) *
                  (static_cast<double>(n) / static_cast<double>(rows));
      loss.backward();
      sum += loss.item<double>();
    }
    ref_opt.step();
    EXPECT_NEAR(losses[i], sum, 1e-5) << "step " << i;
  }
  const auto p = net->parameters(), q = ref->parameters();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << "parameter " << i;
}

TEST(OomGuardTest, PaddedTokenTargetsWeighMicroBatchesByTheirRealTokens) {
  // two rows: one of 1 real token, one of 7; a split into rows must weigh them 1:7, not 1:1
  torch::manual_seed(0);
  auto emb = torch::nn::Embedding(16, 16);
  torch::optim::SGD opt(emb->parameters(), torch::optim::SGDOptions(0.1));
  auto loss_fn = [&](const Batch& b) {
    return torch::nn::functional::cross_entropy(emb->forward(b.inputs).flatten(0, 1), b.targets.flatten());
  };
  const torch::Tensor ids = torch::randint(16, {2, 8}, torch::kLong);
  torch::Tensor targets = torch::randint(16, {2, 8}, torch::kLong);
  targets.index_put_({0, torch::indexing::Slice(1)}, -100);
  targets.index_put_({1, 7}, -100);
  const double whole = loss_fn({ids, targets}).item<double>();
  const double row0 = loss_fn({ids.slice(0, 0, 1), targets.slice(0, 0, 1)}).item<double>();
  const double row1 = loss_fn({ids.slice(0, 1, 2), targets.slice(0, 1, 2)}).item<double>();
  ASSERT_GT(std::abs((row0 + row1) / 2 - whole), 1e-3);  // rows weighed equally would differ
  OomGuard guard(loss_fn, opt);
  (void)guard.memory().after_oom(2, 8, 2);  // as if this batch had run out of memory whole
  EXPECT_NEAR(guard.step({ids, targets}), whole, 1e-5);
  EXPECT_EQ(guard.last_micro_batch(), 1);  // it ran split, one row at a time
}

TEST(OomGuardTest, AnEmptyLossIsAUsageError) {
  auto net = make_net();
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_THROW(OomGuard(nullptr, opt), UsageError);
}

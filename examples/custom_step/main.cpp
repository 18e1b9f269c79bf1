// A user's own training step measured by saturate: a two-input model (a 1x28x28 image and 16
// side features), a custom loss (cross-entropy plus a penalty on the logits), the user's own
// Adam. saturate's search session (session/user_search.h) finds the largest batch that fits the
// memory budget, the recommended batch and the knee of the samples/s curve (objective
// throughput); then where the step's memory goes, a leak check over a run of its steps
// (memory/leak_check.h), and training with the library's trainer at the chosen batch
// (models/user_model.h: accumulation, OOM back-off, checkpoints).
//
//   custom_step [budget MiB, default 64] [cpu|cuda, default cpu]
//
// Built against the installed package (see CMakeLists.txt); exit status 0 when the search found
// an exact largest batch (max fits, max+1 does not).
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include <stdlib.h>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/memory_meter.h"
#include "saturate/memory/breakdown.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/step_memory.h"
#include "saturate/probe/user_step.h"
#include "saturate/report/memory_text.h"
#include "saturate/session/user_search.h"
#include "saturate/models/user_model.h"
#include "saturate/step/phase_observer.h"
#include "saturate/train/trainer.h"

namespace {

struct TwoInputNetImpl : torch::nn::Module {
  TwoInputNetImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        side(register_module("side", torch::nn::Linear(16, 32))),
        head(register_module("head", torch::nn::Linear(32 * 7 * 7 + 32, 10))) {}

  torch::Tensor forward(const torch::Tensor& image, const torch::Tensor& features) {
    auto x = torch::max_pool2d(torch::relu(conv1(image)), 2);  // [N,16,14,14]
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);           // [N,32,7,7]
    auto s = torch::relu(side(features));                      // [N,32]
    return head(torch::cat({x.flatten(1), s}, 1));             // [N,10]
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear side, head;
};
TORCH_MODULE(TwoInputNet);

// The custom loss: cross-entropy plus a small penalty that keeps the logits near zero.
torch::Tensor custom_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels) + 1e-3 * logits.pow(2).mean();
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any tensor exists: on CPU the budget allocator must see every byte.
  saturate::install_cpu_budget_allocator();

  const int64_t budget_mib = argc > 1 ? std::atoll(argv[1]) : 64;
  const torch::Device device(argc > 2 ? argv[2] : "cpu");
  if (budget_mib <= 0) {
    std::cerr << "custom_step: the budget must be a positive number of MiB\n";
    return 2;
  }
  torch::manual_seed(0);

  TwoInputNet model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));

  // One whole training step at `n` samples: make the batch, forward, loss, backward, optimizer.
  auto train_step = [&](int64_t n) -> torch::Tensor {
    torch::Tensor image, features, labels;
    {
      saturate::PhaseScope data(saturate::Phase::kDataWait);
      image = torch::randn({n, 1, 28, 28}, device);
      features = torch::randn({n, 16}, device);
      labels = torch::randint(0, 10, {n}, torch::TensorOptions(device).dtype(torch::kLong));
    }
    torch::Tensor loss;
    {
      saturate::PhaseScope forward(saturate::Phase::kForward);
      loss = custom_loss(model->forward(image, features), labels);
    }
    {
      saturate::PhaseScope backward(saturate::Phase::kBackward);
      optimizer.zero_grad();
      loss.backward();
    }
    {
      saturate::PhaseScope step(saturate::Phase::kOptimizer);
      optimizer.step();
    }
    return loss.detach();
  };

  saturate::UserStepOptions options;
  options.device = device;
  options.parameters = model->parameters();
  // after every trial, failed ones too: drop the gradients and Adam's moments, so that each
  // trial starts from the same memory (the first step of a trial makes them again).
  options.after_trial = [&] {
    optimizer.zero_grad(/*set_to_none=*/true);
    optimizer.state().clear();
  };
  options.name = "two-input net, cross-entropy + logit penalty, Adam";
  saturate::UserTrialStep step([&](int64_t n) { train_step(n); }, options);

  auto meter = saturate::make_memory_meter(device);
  meter->set_budget_bytes(budget_mib << 20);  // on CPU: behaves like a device of this size

  saturate::UserSearchOptions search_options;  // every field documented and checked by check()
  search_options.objective.objective = saturate::Objective::kThroughput;
  search_options.search.on_trial = [](const saturate::Trial& t) {
    std::cout << "  trial batch " << t.batch << ": " << saturate::to_string(t.status) << ", peak "
              << (t.peak_allocated_bytes >> 10) << " KiB\n";
  };
  const saturate::UserSearchResult found = saturate::run_user_search(step, *meter, search_options);
  const saturate::SearchResult& r = found.search;
  if (!r.error.empty()) std::cerr << "custom_step: search error: " << r.error << "\n";

  std::cout << "max_batch          " << r.max_batch << (r.max_batch_exact ? " (exact)" : " (not exact)") << "\n"
            << "recommended_batch  " << r.recommended_batch << "\n"
            << "throughput knee    " << found.objective.batch << " (" << found.objective.reason << ")\n"
            << "trials             " << r.trials.size() << "\n";
  if (r.max_batch <= 0) return 1;

  // Where the memory of one step at the recommended batch goes.
  const int64_t batch = r.recommended_batch > 0 ? r.recommended_batch : r.max_batch;
  const saturate::StepMemory m = saturate::measure_step_memory(step, *meter, batch, model->parameters());
  std::cout << "\nmemory of one step at batch " << batch << ":\n"
            << saturate::breakdown_table(m.breakdown) << "\n";

  // Does memory stay flat over a run of steps at the knee (seed M2)?
  const int64_t knee = found.batch();
  saturate::LeakLoopOptions leak_options;
  leak_options.steps = 12;
  const saturate::LeakCheckResult leak =
      saturate::run_leak_loop([&](int, bool) { train_step(knee); }, *meter, leak_options);
  options.after_trial();
  std::cout << "leak check         " << (leak.report.detected ? "LEAK" : "flat") << " over " << leak.report.steps
            << " steps at batch " << knee << "\n";

  // And train with it through the library's trainer: micro-batches of the knee accumulated to a
  // global batch of 4 x the knee, an OOM halving the micro-batch (the global batch unchanged),
  // checkpoints written atomically. The two inputs travel packed in one tensor per sample.
  saturate::UserModel user;
  user.name = "two-input net";
  user.module = model.ptr();
  user.forward = [&](const torch::Tensor& packed) {
    const torch::Tensor image = packed.slice(1, 0, 28 * 28).reshape({-1, 1, 28, 28});
    return model->forward(image, packed.slice(1, 28 * 28));
  };
  user.sample_shape = {28 * 28 + 16};
  user.classes = 10;
  saturate::Workload workload(saturate::build_user_model(user), device, saturate::OptimizerKind::kAdam, 1e-3);
  workload.set_loss(custom_loss);
  const int64_t global = 4 * knee;
  saturate::TensorTrainData data(torch::randn({8 * global, 28 * 28 + 16}), torch::randint(0, 10, {8 * global}), global,
                                 "random samples");
  saturate::TrainOptions train;
  train.micro_batch = knee;
  train.accumulation = 4;
  train.max_steps = 3;
  train.schedule.peak_lr = 1e-3;
  char dir_template[] = "/tmp/custom_step_ckpt_XXXXXX";
  if (const char* dir = mkdtemp(dir_template)) train.checkpoint_dir = dir;
  train.on_step = [](int64_t s, double loss, double lr) {
    std::cout << "train step " << s << ": loss " << loss << " (lr " << lr << ")\n";
  };
  const saturate::TrainResult trained = saturate::Trainer(workload, *meter, data, nullptr, train).run();
  std::cout << "trained            " << trained.steps << " steps, micro-batch " << trained.micro_batch << " x "
            << trained.accumulation << " = global batch " << trained.global_batch << ", "
            << trained.oom_backoffs.size() << " OOM back-off(s), " << trained.checkpoints_written
            << " checkpoint(s) in " << train.checkpoint_dir << "\n";

  return r.max_batch_exact ? 0 : 1;
}

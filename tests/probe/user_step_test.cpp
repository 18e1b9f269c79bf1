// A user's own step (any model, inputs, loss and optimizer) measured like the built-in models:
// the search's answer is exact and agrees with the built-in step's on the same model, an OOM in
// the user's code is a trial result with memory back at the baseline, and the phases the user
// marks reach the memory breakdown.
#include "saturate/probe/user_step.h"

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/memory/step_memory.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/search/search.h"
#include "support/support.h"
#include "support/trial_findings.h"

using namespace saturate;

namespace {

/// Two inputs (an image and side features), a custom loss: nothing the built-in step knows.
struct TwoInputNetImpl : torch::nn::Module {
  TwoInputNetImpl()
      : image(register_module("image", torch::nn::Linear(784, 256))),
        side(register_module("side", torch::nn::Linear(16, 256))),
        head(register_module("head", torch::nn::Linear(256, 10))) {}
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& s) {
    return head(torch::relu(image(x.flatten(1)) + side(s)));
  }
  torch::nn::Linear image, side, head;
};
TORCH_MODULE(TwoInputNet);

struct BudgetGuard {
  ~BudgetGuard() { set_cpu_budget_bytes(0); }
};

/// The user's whole training step at batch n: batch, forward, a custom loss, backward, step.
struct UserLoop {
  TwoInputNet net;
  std::unique_ptr<torch::optim::Adam> opt = std::make_unique<torch::optim::Adam>(net->parameters());
  void step(int64_t n) {
    const torch::Tensor x = torch::randn({n, 1, 28, 28}), s = torch::randn({n, 16});
    const torch::Tensor y = torch::randint(10, {n});
    opt->zero_grad();
    torch::Tensor loss;
    {
      PhaseScope forward(Phase::kForward);
      const torch::Tensor logits = net->forward(x, s);
      loss = torch::nn::functional::cross_entropy(logits, y) + 1e-3 * logits.pow(2).mean();  // custom loss
    }
    {
      PhaseScope backward(Phase::kBackward);
      loss.backward();
    }
    PhaseScope optimizer(Phase::kOptimizer);
    opt->step();
  }
  UserStepOptions options() {
    UserStepOptions o;
    o.parameters = net->parameters();
    o.after_trial = [this] { opt = std::make_unique<torch::optim::Adam>(net->parameters()); };  // state too
    return o;
  }
};

/// The user's loop as a trial step on a CPU budget of `budget_bytes`.
struct UserRig {
  explicit UserRig(int64_t budget_bytes)
      : meter(make_memory_meter(torch::kCPU)), step([this](int64_t n) { loop.step(n); }, loop.options()) {
    meter->set_budget_bytes(budget_bytes);
  }
  BudgetGuard guard;
  std::unique_ptr<MemoryMeter> meter;
  UserLoop loop;
  UserTrialStep step;
};

/// One trial of the user's loop at args[0] on a new rig of 48 MiB: its status ("ok", "oom", ...).
std::string user_trial_in_a_fresh_process(const std::vector<std::string>& args) {
  UserRig rig(48 << 20);
  Probe probe(rig.step, *rig.meter);
  return to_string(probe.run(std::stoll(args.at(0)), {1, 2, 0}).status);
}
SATURATE_FRESH_CHILD("user_trial", user_trial_in_a_fresh_process);

}  // namespace

TEST(UserStepTest, TheSearchOnAUsersOwnStepIsExactInFreshProbes) {
  UserRig rig(48 << 20);
  Probe probe(rig.step, *rig.meter);
  const SearchResult r = search_batch_size(probe, {});
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_GT(r.max_batch, 100);
  EXPECT_TRUE(r.max_batch_exact);
  // the search's own flag aside: in processes that never searched (a new loop, optimizer, probe
  // and meter each) the max fits and max + 1 runs out of memory
  EXPECT_EQ(saturate::testing::run_fresh_child("user_trial", {std::to_string(r.max_batch)}), "ok");
  EXPECT_EQ(saturate::testing::run_fresh_child("user_trial", {std::to_string(r.max_batch + 1)}), "oom");
}

TEST(UserStepTest, AUserStepRunningTheBuiltInStepFindsTheBuiltInMaximum) {
  BudgetGuard guard;
  auto meter = make_memory_meter(torch::kCPU);
  ModelSpec spec;
  spec.name = "mlp";
  spec.width = 256;
  Workload zoo(build_model(spec), torch::kCPU, OptimizerKind::kAdam);
  Workload mine(build_model(spec), torch::kCPU, OptimizerKind::kAdam);
  meter->set_budget_bytes(64 << 20);
  Probe zoo_probe(zoo, *meter);
  const SearchResult zoo_result = search_batch_size(zoo_probe, {});
  // the same model, optimizer and loss, written as a user would write the loop
  std::unique_ptr<torch::optim::Optimizer> opt = mine.make_optimizer();
  UserStepOptions o;
  o.parameters = mine.model().parameters();
  o.after_trial = [&] { opt = mine.make_optimizer(); };
  UserTrialStep step(
      [&](int64_t n) {
        const Batch b = mine.synthetic_batch(n);
        opt->zero_grad();
        mine.loss(mine.model().forward(b.inputs), b.targets).backward();
        opt->step();
      },
      o);
  Probe user_probe(step, *meter);
  const SearchResult user_result = search_batch_size(user_probe, {});
  ASSERT_GT(zoo_result.max_batch, 0);
  EXPECT_TRUE(user_result.max_batch_exact);
  EXPECT_NEAR(static_cast<double>(user_result.max_batch), static_cast<double>(zoo_result.max_batch),
              0.01 * static_cast<double>(zoo_result.max_batch))
      << "user " << user_result.max_batch << " vs built-in " << zoo_result.max_batch;
}

TEST(UserStepTest, AnOutOfMemoryInTheUsersCodeIsAResultAndMemoryReturnsToTheBaseline) {
  UserRig rig(32 << 20);
  Probe probe(rig.step, *rig.meter);
  const int64_t baseline = rig.meter->stats().allocated_bytes;
  for (int64_t n : {100000, 20000, 9000}) {  // in the batch, the forward, the backward
    const Trial t = probe.run(n, {1, 1, 0});
    EXPECT_EQ(t.status, TrialStatus::kOom) << n << ": " << t.error;
    EXPECT_EQ(t.after_bytes, baseline) << n;
  }
  EXPECT_EQ(probe.run(16, {1, 1, 0}).status, TrialStatus::kOk);
  EXPECT_EQ(rig.meter->stats().allocated_bytes, baseline);
}

TEST(UserStepTest, PhasesTheUserMarksGiveTheMemoryBreakdownItsParts) {
  UserRig rig(256 << 20);
  const StepMemory m = measure_step_memory(rig.step, *rig.meter, 512, rig.loop.net->parameters());
  ASSERT_EQ(m.trial.status, TrialStatus::kOk) << m.trial.error;
  int64_t params = 0;
  for (const auto& p : rig.loop.net->parameters()) params += p.numel() * 4;
  EXPECT_EQ(m.breakdown.parameters_bytes, params);
  // the log's peak is the trial's, and the parts the marked phases name are each there (the
  // parts add up by construction: "other" takes the rest, so it is the check)
  EXPECT_EQ(m.breakdown.peak_allocated_bytes, m.trial.peak_allocated_bytes);
  EXPECT_GT(m.breakdown.activations_bytes, 0) << m.breakdown.peak_phase;
  EXPECT_LE(m.breakdown.gradients_bytes, params);
  EXPECT_LE(m.breakdown.other_bytes, m.breakdown.peak_allocated_bytes / 10);
}

TEST(UserStepTest, TheMonitorTimesThePhasesAUserMarksAndGivesAVerdict) {
  UserRig rig(256 << 20);
  Probe probe(rig.step, *rig.meter);
  MonitorOptions mo;
  mo.sample_hz = 0;
  MonitorObserver monitor(mo);
  probe.add_observer(&monitor);
  const Trial t = probe.run(256, {1, 3, 0});
  monitor.finish();
  ASSERT_TRUE(t.ok()) << t.error;
  ASSERT_TRUE(saturate::testing::findings_json(t).contains("phases_ms")) << saturate::testing::findings_json(t).dump();
  for (const char* phase : {"forward", "backward", "optimizer"})
    EXPECT_GT(saturate::testing::findings_json(t)["phases_ms"].value(phase, 0.0), 0.0) << phase << ": " << saturate::testing::findings_json(t)["phases_ms"].dump();
  EXPECT_EQ(saturate::testing::findings_json(t)["phases_ms"].value("data_wait", 0.0), 0.0);
  // the phases are parts of a step: the verdict's representative step (the median by step time)
  // splits into shares of its own time that add up to at most the whole. (phases_ms holds means
  // and step_time_ms a median: one step preempted by other load moves the first, not the second.)
  const nlohmann::json evidence = saturate::testing::findings_json(t)["bottleneck"]["evidence"];
  const double shares = evidence.value("data_share", -1.0) + evidence.value("communication_share", -1.0) +
                        evidence.value("compute_share", -1.0);
  EXPECT_GT(evidence.value("compute_share", 0.0), 0.0) << evidence.dump();
  EXPECT_LE(shares, 1.0 + 0.003) << evidence.dump();
  EXPECT_FALSE(saturate::testing::findings_json(t)["bottleneck"].value("verdict", "").empty());
}

TEST(UserStepTest, AnEmptyCallableIsAUsageError) {
  ASSERT_THROWS_WITH(UserTrialStep(UserTrialStep::StepFn{}), UsageError, "callable");
}

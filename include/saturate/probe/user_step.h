// Implements: a user's own training step as a trial step, for LibTorch programs: any model, any
// number of inputs, any loss, their optimizer. The callable builds a batch of the given size and
// runs forward, loss, backward and the optimizer step; the probe, the search, the memory
// breakdown and the monitor then measure it exactly as they measure the built-in models:
//
//   saturate::UserStepOptions o;
//   o.parameters = model->parameters();
//   saturate::UserTrialStep step([&](int64_t n) { /* one step at batch n */ }, o);
//   auto meter = saturate::make_memory_meter(torch::kCPU);
//   meter->set_budget_bytes(512 << 20);              // a CPU run behaves like a GPU of 512 MiB
//   saturate::Probe probe(step, *meter);
//   saturate::SearchResult r = saturate::search_batch_size(probe, {});
//
// Phases (for the breakdown and the monitor) are marked inside the callable with
// saturate::PhaseScope (step/phase_observer.h); unmarked work counts as the step as a whole.
// An out-of-memory inside the callable is a trial result: the exception and the graph it held
// die with it, the parameters' gradients are dropped, and `after_trial` (if given) lets the
// user drop what else their step keeps (e.g. zero_grad(set_to_none)).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "saturate/probe/trial_step.h"

namespace saturate {

struct UserStepOptions {
  torch::Device device = torch::kCPU;
  /// The model's parameters: their gradients are dropped after every trial (failed ones too).
  std::vector<torch::Tensor> parameters;
  /// Called after every trial, failed ones too (must not throw); may be empty.
  std::function<void()> after_trial;
  /// Shown in the trial's JSON as `step`.
  std::string name = "user step";
};

class UserTrialStep final : public TrialStep {
 public:
  using StepFn = std::function<void(int64_t batch_size)>;
  /// Throws UsageError for an empty callable.
  explicit UserTrialStep(StepFn step, UserStepOptions options = {});

  const UserStepOptions& options() const { return options_; }
  torch::Device device() const override { return options_.device; }
  void step(int64_t batch, PhaseObserver* observer) override;
  void end() noexcept override;
  void describe(StepDescription& setup) const override;

 private:
  StepFn step_;
  UserStepOptions options_;
};

}  // namespace saturate

#include "saturate/probe/user_step.h"

#include "saturate/core/errors.h"

namespace saturate {

UserTrialStep::UserTrialStep(StepFn step, UserStepOptions options)
    : step_(std::move(step)), options_(std::move(options)) {
  if (!step_) throw UsageError("the user step is empty: give a callable that runs one training step at a batch size");
}

void UserTrialStep::step(int64_t batch, PhaseObserver* observer) {
  step_(batch);  // the probe installed `observer` for the step's PhaseScopes
}

void UserTrialStep::end() noexcept {
  for (auto& p : options_.parameters)
    if (p.defined()) p.mutable_grad() = torch::Tensor();
  if (options_.after_trial) {
    try {
      options_.after_trial();
    } catch (...) {
    }
  }
}

void UserTrialStep::describe(StepDescription& setup) const { setup.step = options_.name; }

}  // namespace saturate

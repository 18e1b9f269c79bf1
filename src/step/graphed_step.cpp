#include "saturate/step/graphed_step.h"

#include "saturate/step/training_step.h"

namespace saturate {

#ifndef SATURATE_WITH_CUDA
// Without CUDA the step always runs eagerly (TrainingStep refuses cuda_graphs off a GPU).
class GraphedStep::Impl {
 public:
  Impl(std::function<StepResult(const Batch&)> eager) : eager_(std::move(eager)) {}
  StepResult run(const Batch& batch) { return eager_(batch); }
  bool captured() const { return false; }
  const std::string& fallback_reason() const { return reason_; }

 private:
  std::function<StepResult(const Batch&)> eager_;
  std::string reason_ = "this build has no CUDA";
};

GraphedStep::GraphedStep(std::function<StepResult(const Batch&)> eager, CapturableOptimizer&, const torch::Device&,
                         int)
    : impl_(std::make_unique<Impl>(std::move(eager))) {}

bool cuda_graphs_compiled() { return false; }

GraphedStep::~GraphedStep() = default;
StepResult GraphedStep::run(const Batch& batch) { return impl_->run(batch); }
bool GraphedStep::captured() const { return impl_->captured(); }
const std::string& GraphedStep::fallback_reason() const { return impl_->fallback_reason(); }
#endif  // the CUDA build's are in graphed_step_cuda.cpp

}  // namespace saturate

// CUDA graphs of the whole training step (graphed_step.h).
#include "saturate/step/graphed_step.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <optional>

#include "saturate/step/training_step.h"

namespace saturate {

class GraphedStep::Impl {
 public:
  Impl(std::function<StepResult(const Batch&)> eager, CapturableOptimizer& optimizer, const torch::Device& device,
       int warmup_steps)
      : eager_(std::move(eager)), optimizer_(optimizer), device_(device), warmup_steps_(warmup_steps) {
    optimizer_.set_capturable(true);
  }

  ~Impl() {
    graph_.reset();  // its pool goes back to the caching allocator (freed by the next empty_cache)
  }

  StepResult run(const Batch& batch) {
    if (!reason_.empty()) return eager_(batch);
    if (graph_ && !same_shape(batch)) return eager_(batch);  // an epoch's shorter last batch
    if (!graph_ && warmed_ < warmup_steps_) return warm_up(batch);
    if (!graph_) return capture(batch);
    return replay(batch);
  }

  bool captured() const { return graph_ != nullptr; }
  const std::string& fallback_reason() const { return reason_; }

 private:
  bool same_shape(const Batch& b) const {
    return b.inputs.sizes() == inputs_.sizes() && b.targets.sizes() == targets_.sizes() &&
           b.inputs.scalar_type() == inputs_.scalar_type() && b.targets.scalar_type() == targets_.scalar_type();
  }

  /// Runs `f` on a side stream that waits for the current one, and makes the current one wait
  /// for it after (capture may not use the default stream; warm-up must run where capture will).
  template <typename F>
  auto on_side_stream(F&& f) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
    if (!side_) side_ = c10::cuda::getStreamFromPool(false, device_.index());
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(*side_);
    auto finish = [&] {
      at::cuda::CUDAEvent done;
      done.record(*side_);
      done.block(current);
    };
    c10::cuda::CUDAStreamGuard guard(*side_);
    try {
      auto r = f();
      finish();
      return r;
    } catch (...) {
      finish();
      throw;
    }
  }

  StepResult warm_up(const Batch& batch) {
    StepResult r = on_side_stream([&] { return eager_(batch); });
    ++warmed_;
    return r;
  }

  StepResult capture(const Batch& batch) {
    inputs_ = batch.inputs.to(device_).clone();
    targets_ = batch.targets.to(device_).clone();
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    const bool cache = at::autocast::is_autocast_cache_enabled();
    at::autocast::set_autocast_cache_enabled(false);  // cached casts would outlive the capture
    optimizer_.refresh_lr();
    optimizer_.set_capturing(true);
    try {
      on_side_stream([&] {
        graph->capture_begin();
        try {
          static_ = eager_({inputs_, targets_});
        } catch (...) {
          try {
            graph->capture_end();
          } catch (...) {
          }
          throw;
        }
        graph->capture_end();
        return 0;
      });
    } catch (const std::exception& e) {
      optimizer_.set_capturing(false);
      at::autocast::set_autocast_cache_enabled(cache);
      (void)cudaGetLastError();  // the failed capture's sticky-free error
      const std::string what = e.what();
      reason_ = "capture failed: " + what.substr(0, what.find('\n'));
      graph.reset();
      inputs_ = targets_ = torch::Tensor();
      static_ = StepResult{};
      return eager_(batch);  // this step, eagerly (the capture ran none of it)
    }
    optimizer_.set_capturing(false);
    at::autocast::set_autocast_cache_enabled(cache);
    graph_ = std::move(graph);
    graph_->replay();  // the capture recorded the step; the replay runs it
    return result();
  }

  StepResult replay(const Batch& batch) {
    inputs_.copy_(batch.inputs, /*non_blocking=*/true);
    targets_.copy_(batch.targets, /*non_blocking=*/true);
    optimizer_.refresh_lr();
    graph_->replay();
    return result();
  }

  /// The static loss is overwritten by the next replay: the caller gets its own copy.
  StepResult result() const {
    StepResult r;
    r.loss = static_.loss.clone();
    r.stepped = true;
    return r;
  }

  std::function<StepResult(const Batch&)> eager_;
  CapturableOptimizer& optimizer_;
  torch::Device device_;
  int warmup_steps_;
  int warmed_ = 0;
  std::optional<c10::cuda::CUDAStream> side_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  torch::Tensor inputs_, targets_;
  StepResult static_;
  std::string reason_;
};

GraphedStep::GraphedStep(std::function<StepResult(const Batch&)> eager, CapturableOptimizer& optimizer,
                         const torch::Device& device, int warmup_steps)
    : impl_(std::make_unique<Impl>(std::move(eager), optimizer, device, warmup_steps)) {}

GraphedStep::~GraphedStep() = default;
StepResult GraphedStep::run(const Batch& batch) { return impl_->run(batch); }
bool GraphedStep::captured() const { return impl_->captured(); }
const std::string& GraphedStep::fallback_reason() const { return impl_->fallback_reason(); }

bool cuda_graphs_compiled() { return true; }

}  // namespace saturate

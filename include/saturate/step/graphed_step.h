// Implements: the fast path cuda_graphs (seed B7) — the whole training step (forward, backward,
// optimizer step) captured once as a CUDA graph and replayed, so that the host launches one graph
// instead of hundreds of kernels per step. The batch shape is fixed: the first steps run eagerly
// on a side stream (warm-up: cuBLAS/cuDNN workspaces, optimizer state, momentum buffers), the
// next is captured into static input tensors and replayed; each later step copies its batch into
// them and replays. The optimizer must be capturable (step/fused_optimizer.h): its step count and
// learning rate live on the device. The graph's private memory pool is the caching allocator's,
// so its bytes count in the measured peak. When capture fails (an operator that synchronizes, a
// shape that changes), the step runs eagerly from then on and fallback_reason() says why; a batch
// of another shape (an epoch's last) runs eagerly without dropping the graph.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <torch/types.h>

#include "saturate/step/fused_optimizer.h"
#include "saturate/step/workload.h"

namespace saturate {

struct StepResult;

class GraphedStep {
 public:
  /// `eager` runs one step the ordinary way (TrainingStep's); `optimizer` is the step's.
  GraphedStep(std::function<StepResult(const Batch&)> eager, CapturableOptimizer& optimizer,
              const torch::Device& device, int warmup_steps = 3);
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  StepResult run(const Batch& batch);
  bool captured() const;
  /// Why the step runs eagerly ("" while graphed or still warming up).
  const std::string& fallback_reason() const;

  /// The graph implementation (CUDA builds); internal.
  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Whether this build can capture CUDA graphs (LibTorch with CUDA).
bool cuda_graphs_compiled();

}  // namespace saturate

// Implements: the analytic FLOPs of the built-in models, from their architecture alone.
// Counted as PyTorch's FlopCounterMode counts them: matrix products, convolutions and attention
// at 2 FLOPs per multiply-add; normalization, activations, pooling and the optimizer are not
// counted (they are not what a GEMM peak measures). A training step is the forward pass plus the
// backward's two products per layer (input and weight gradients), except for the first layer,
// whose input needs no gradient.
#pragma once
#include <optional>

#include "saturate/models/zoo.h"

namespace saturate {

struct ModelFlops {
  double forward_per_sample = 0;
  double training_per_sample = 0;  ///< forward + backward of one sample
};

/// The FLOPs of a built-in model (spec as resolve_model_spec fills it); nullopt for a TorchScript
/// file, whose FLOPs are counted from a step's operators instead (monitor/flop_counter.h).
std::optional<ModelFlops> analytic_flops(const ModelSpec& resolved);

}  // namespace saturate

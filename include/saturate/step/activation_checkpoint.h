// Implements: activation checkpointing (seed M5), as torch.utils.checkpoint's reentrant form
// does it: a segment runs forward without keeping its activations; during backward it is run
// again with the RNG state (and autocast state) of the first run, so dropout matches, and its
// gradients are taken from the recomputation. Built-in models checkpoint block by block.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "saturate/models/model.h"

namespace saturate {

/// none | blocks (every block) | every-N (every N-th block, "every-2").
struct CheckpointPolicy {
  int every = 0;  ///< 0: none; 1: every block; N: blocks 0, N, 2N, ...
  bool enabled() const { return every > 0; }
  bool applies_to(size_t block) const { return every > 0 && block % static_cast<size_t>(every) == 0; }
};
std::string to_string(const CheckpointPolicy& p);
/// "none" | "blocks" | "every-N"; throws UsageError otherwise.
CheckpointPolicy parse_checkpointing(const std::string& text);

using SegmentFn = std::function<torch::Tensor(const torch::Tensor&)>;

/// Runs fn(input) without storing its activations; `params` are the parameters fn uses (they
/// receive gradients through the recomputation). `fn` must live until backward has run.
torch::Tensor checkpoint(const SegmentFn& fn, const torch::Tensor& input, const std::vector<torch::Tensor>& params);

/// A callable for `block` that lives as long as the process (the checkpoint's recomputation
/// calls it during backward).
const SegmentFn& segment_of(torch::nn::AnyModule& block);

/// Whether this thread is running a checkpointed segment again in the backward: its FLOPs are
/// hardware FLOPs, not the model's (a FLOP counter keeps them apart: MFU vs HFU).
bool recomputing_checkpoint();

/// model.forward(x) with the blocks the policy names checkpointed.
torch::Tensor forward_with_checkpointing(BlockModelImpl& model, const torch::Tensor& x, const CheckpointPolicy& policy);

}  // namespace saturate

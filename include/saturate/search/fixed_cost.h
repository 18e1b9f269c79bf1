// Implements: the memory every training step holds whatever its batch — the trainable weights,
// one gradient each and the optimizer's state — and the check that a target leaves room above
// it. A target below this fixed cost is met by no batch: a usage error before any trial, naming
// the cost (issue 27: such a search ran to the end and printed "recommended_batch 0 (exact)").
#pragma once
#include <cstdint>
#include <string>

namespace saturate {

struct FixedCost {
  int64_t weight_bytes = 0;           ///< trainable parameters
  int64_t gradient_bytes = 0;         ///< one gradient per trainable parameter
  int64_t optimizer_state_bytes = 0;  ///< 0 where the optimizer's state is not known
  std::string optimizer;              ///< its name, for the message ("" when unknown)
  int64_t total_bytes() const { return weight_bytes + gradient_bytes + optimizer_state_bytes; }
};

/// Parameter copies an optimizer keeps per trainable parameter: 2 for Adam and AdamW (the two
/// moments), 1 for SGD with momentum (`momentum`), 0 when unknown (a lower bound).
int optimizer_state_copies(const std::string& optimizer, bool momentum);

/// The fixed cost of `weight_bytes` of trainable parameters under an optimizer keeping
/// `state_copies` copies of them.
FixedCost fixed_cost_of(int64_t weight_bytes, int state_copies, const std::string& optimizer);

/// UsageError("target_fraction") when `target_fraction` x `budget_bytes` is below `cost`, naming
/// the cost, its parts and what to raise; nothing when the budget is unknown (0) or it fits.
void check_target_above_fixed_cost(int64_t budget_bytes, double target_fraction, const FixedCost& cost);

/// The law of a sharded model's states (FSDP, ZeRO-3): over N ranks each holds 1/N of `cost`
/// (its share of the weights, gradients and optimizer state) plus one unit's whole weights and
/// gradients while that unit is gathered (2 x `largest_unit_bytes`). The smallest N whose share
/// fits `budget_bytes`; 0 when none does (the largest unit alone does not fit). Activations come
/// on top: a lower bound on the ranks a run needs.
int64_t min_ranks_to_shard(const FixedCost& cost, int64_t largest_unit_bytes, int64_t budget_bytes);

}  // namespace saturate

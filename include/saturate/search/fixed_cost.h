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

/// How a model's states are split over the ranks (python/saturate/_shard_plan.py's strategies).
enum class ShardStrategy {
  kReplicated,      ///< "ddp": every rank holds everything: (2 + k) P
  kShardGradients,  ///< "fsdp_no_reshard" (ZeRO-2-like): whole weights kept, P + (1 + k) P / N
  kShardAll,        ///< "fsdp" (ZeRO-3-like): (2 + k) P / N + 2 U, U's weights and gradients gathered
};
/// "ddp", "fsdp_no_reshard", "fsdp"; UsageError("strategy") naming them otherwise.
ShardStrategy parse_shard_strategy(const std::string& name);

/// The law of a rank's model states under `strategy` over `world_size` ranks, with P
/// `parameter_bytes` of weights, an optimizer keeping `state_factor` x P of state (Adam: 2) and
/// the largest unit U `largest_unit_bytes`. The one law the command line and the Python plan use.
int64_t shard_model_state_bytes(ShardStrategy strategy, int64_t parameter_bytes, double state_factor,
                                int64_t largest_unit_bytes, int64_t world_size);

/// The fewest ranks of `budget_bytes` whose model states fit under `strategy` by the law above
/// (at most the budget); 0 when no number of ranks does (the unsharded part alone does not
/// fit). Activations come on top: a lower bound on the ranks a run needs.
int64_t shard_min_world_size(ShardStrategy strategy, int64_t parameter_bytes, double state_factor,
                             int64_t largest_unit_bytes, int64_t budget_bytes);

/// shard_min_world_size under kShardAll for a `cost` (its optimizer state gives the factor).
int64_t min_ranks_to_shard(const FixedCost& cost, int64_t largest_unit_bytes, int64_t budget_bytes);

}  // namespace saturate

#include "saturate/search/fixed_cost.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {

int optimizer_state_copies(const std::string& optimizer, bool momentum) {
  if (optimizer == "adam" || optimizer == "adamw" || optimizer == "Adam" || optimizer == "AdamW") return 2;
  if (optimizer == "sgd" || optimizer == "SGD") return momentum ? 1 : 0;
  return 0;
}

FixedCost fixed_cost_of(int64_t weight_bytes, int state_copies, const std::string& optimizer) {
  FixedCost c;
  c.weight_bytes = weight_bytes;
  c.gradient_bytes = weight_bytes;
  c.optimizer_state_bytes = weight_bytes * state_copies;
  c.optimizer = optimizer;
  return c;
}

void check_target_above_fixed_cost(int64_t budget_bytes, double target_fraction, const FixedCost& cost) {
  if (budget_bytes <= 0) return;
  const int64_t target = static_cast<int64_t>(std::floor(target_fraction * static_cast<double>(budget_bytes)));
  const int64_t fixed = cost.total_bytes();
  if (fixed <= target) return;
  const double fraction_needed = std::ceil(100.0 * static_cast<double>(fixed) / static_cast<double>(budget_bytes)) / 100.0;
  const std::string raise =
      fraction_needed < 1.0 ? fmt::format("raise `target_fraction` above {:.2f}, or `memory_budget`", fraction_needed)
                            : fmt::format("raise `memory_budget` above {} ({} / {:g})",
                                          format_bytes(static_cast<int64_t>(std::ceil(static_cast<double>(fixed) / target_fraction))),
                                          format_bytes(fixed), target_fraction);
  const std::string state = cost.optimizer_state_bytes > 0
                                ? fmt::format(" and {} of {} state", format_bytes(cost.optimizer_state_bytes),
                                              cost.optimizer.empty() ? std::string("optimizer") : cost.optimizer)
                                : std::string();
  throw UsageError(fraction_needed < 1.0 ? "target_fraction" : "memory_budget",
                   fmt::format("{:g} of the budget {} is {}, below the fixed cost every batch holds: {} of weights, "
                               "as much in gradients{} = {} (before any activation); no batch can stay within it: {}",
                               target_fraction, format_bytes(budget_bytes), format_bytes(target),
                               format_bytes(cost.weight_bytes), state, format_bytes(fixed), raise));
}

ShardStrategy parse_shard_strategy(const std::string& name) {
  if (name == "ddp") return ShardStrategy::kReplicated;
  if (name == "fsdp_no_reshard") return ShardStrategy::kShardGradients;
  if (name == "fsdp") return ShardStrategy::kShardAll;
  throw UsageError("strategy", fmt::format("'{}' is not a strategy: give ddp, fsdp_no_reshard or fsdp", name));
}

int64_t shard_model_state_bytes(ShardStrategy strategy, int64_t parameter_bytes, double state_factor,
                                int64_t largest_unit_bytes, int64_t world_size) {
  const double p = static_cast<double>(parameter_bytes), k = state_factor;
  const double n = static_cast<double>(std::max<int64_t>(1, world_size));
  switch (strategy) {
    case ShardStrategy::kReplicated: return static_cast<int64_t>((2 + k) * p);
    case ShardStrategy::kShardAll: return static_cast<int64_t>((2 + k) * p / n) + 2 * largest_unit_bytes;
    case ShardStrategy::kShardGradients: return static_cast<int64_t>(p + (1 + k) * p / n);
  }
  return 0;
}

int64_t shard_min_world_size(ShardStrategy strategy, int64_t parameter_bytes, double state_factor,
                             int64_t largest_unit_bytes, int64_t budget_bytes) {
  const double p = static_cast<double>(parameter_bytes), k = state_factor, b = static_cast<double>(budget_bytes);
  // what sharding does not divide, and what it does
  double fixed = 0, divided = 0;
  switch (strategy) {
    case ShardStrategy::kReplicated: return (2 + k) * p < b ? 1 : 0;
    case ShardStrategy::kShardAll: fixed = 2.0 * static_cast<double>(largest_unit_bytes); divided = (2 + k) * p; break;
    case ShardStrategy::kShardGradients: fixed = p; divided = (1 + k) * p; break;
  }
  const double room = b - fixed;
  if (room <= 0) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(divided / room)));
}

int64_t min_ranks_to_shard(const FixedCost& cost, int64_t largest_unit_bytes, int64_t budget_bytes) {
  const double factor = cost.weight_bytes > 0 ? static_cast<double>(cost.optimizer_state_bytes) /
                                                    static_cast<double>(cost.weight_bytes)
                                              : 0.0;
  return shard_min_world_size(ShardStrategy::kShardAll, cost.weight_bytes, factor, largest_unit_bytes, budget_bytes);
}

}  // namespace saturate

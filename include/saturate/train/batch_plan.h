// Implements: the batch plan of a training run: micro-batch x accumulation x ranks = global
// batch. The user gives any two of micro-batch, accumulation and global batch (the micro-batch
// may be left to the search); the plan checks them before any device work and completes them.
// Errors name the option they concern (UsageError::option()): "micro_batch", "accumulation",
// "global_batch".
#pragma once
#include <cstdint>
#include <string>

namespace saturate {

struct BatchRequest {
  int64_t micro_batch = 0;   ///< samples per forward/backward; 0: chosen by the search (auto)
  int64_t accumulation = 0;  ///< micro-batches per optimizer step; 0: follows from the others
  int64_t global_batch = 0;  ///< samples per optimizer step over all ranks; 0: micro x accumulation x ranks
  int world_size = 1;
};

struct BatchPlan {
  int64_t micro_batch = 0;
  int64_t accumulation = 1;
  int64_t rank_batch = 0;    ///< samples per optimizer step on one rank (micro x accumulation)
  int64_t global_batch = 0;  ///< rank_batch x ranks
  int world_size = 1;
  /// "micro 32 x 4 = global 128" or "micro 32 x 4 x 2 ranks = global 256".
  std::string text() const;
};

/// This rank's share of a global batch; UsageError("global_batch") when the ranks cannot
/// share it equally (the message names the nearest multiples).
int64_t rank_share(int64_t global_batch, int world_size);

/// Checks what can be checked before the micro-batch is known: no negative value, a global
/// batch the ranks share equally, and micro-batch x accumulation = share when all three are
/// given. A micro-batch that does not divide the share is fine: the last one is shorter.
void check_batch_request(const BatchRequest& request);

/// The largest micro-batch the request allows (its rank share when a global batch is given; 0:
/// no limit) — the cap of a search for the micro-batch.
int64_t micro_batch_limit(const BatchRequest& request);

/// The plan with `micro_batch` (the request's, or the search's choice when it had none). A global
/// batch that the micro-batch does not divide gets the accumulation that covers it with a
/// smaller last micro-batch (the optimizer still sees the exact mean gradient).
BatchPlan plan_batches(const BatchRequest& request, int64_t micro_batch);

}  // namespace saturate

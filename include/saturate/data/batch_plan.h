// Implements: the batch plan of a training run: micro-batch x accumulation x ranks = global
// batch. The user gives any two of micro-batch, accumulation and global batch (the micro-batch
// may be left to the search); the plan checks them before any device work and completes them.
// Errors name the option they concern (UsageError::option()): "micro_batch", "accumulation",
// "global_batch".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace saturate {

struct BatchRequest {
  std::optional<int64_t> micro_batch;   ///< samples per forward/backward; nullopt: chosen by the search (auto)
  std::optional<int64_t> accumulation;  ///< micro-batches per optimizer step; nullopt: follows from the others
  std::optional<int64_t> global_batch;  ///< samples per optimizer step over all ranks; nullopt: micro x accumulation x ranks
  int world_size = 1;
  /// Unequal shares: each rank's samples of every global batch (`shares`; empty: equal), and
  /// which of them is this process's. Their sum is the global batch; accumulation follows from
  /// each rank's share and micro-batch.
  std::vector<int64_t> shares;
  int rank = 0;
};

struct BatchPlan {
  int64_t micro_batch = 0;
  int64_t accumulation = 1;
  int64_t rank_batch = 0;    ///< samples per optimizer step on one rank (micro x accumulation)
  int64_t global_batch = 0;  ///< the ranks' rank_batch together (rank_batch x ranks with equal shares)
  int world_size = 1;
  /// The last micro-batch of a rank's step: shorter than micro_batch when it does not divide
  /// rank_batch.
  int64_t last_micro_batch() const { return rank_batch - micro_batch * (accumulation - 1); }
  /// batch_arithmetic in short words: "micro 32 x 4 = global 128", "micro 64 + 36 (a shorter last one) = global 100".
  std::string text() const;
};

/// The batch plan as arithmetic that holds, for people: "micro-batch 32 x 4 = global batch 128",
/// "micro-batch 64 x 4 x 2 ranks = global batch 512", and with a shorter last micro-batch
/// "micro-batch 62 x 66 + 4 (a shorter last one) = 4096 per rank x 2 ranks = global batch 8192".
/// `global_batch` is every rank's together; the words may be shorter ("micro", "global").
std::string batch_arithmetic(int64_t micro_batch, int64_t accumulation, int world_size, int64_t global_batch,
                             const char* micro_word = "micro-batch", const char* global_word = "global batch");

/// The same for one rank of unequal shares (`rank_batch`, its samples of every global batch, is
/// not global / world): "micro-batch 16 x 3 = 48 on this rank, of global batch 64 over 2 ranks
/// (unequal shares)". Equal shares (or rank_batch 0) read as batch_arithmetic.
std::string rank_batch_arithmetic(int64_t micro_batch, int64_t accumulation, int64_t rank_batch, int world_size,
                                  int64_t global_batch, const char* micro_word = "micro-batch",
                                  const char* global_word = "global batch");

/// This rank's share of a global batch; UsageError("global_batch") when the ranks cannot
/// share it equally (the message names the nearest multiples).
int64_t rank_share(int64_t global_batch, int world_size);
/// This rank's share of the request's global batch: its `shares` entry when given (checked: one
/// positive count per rank, summing to a given global batch), else rank_share's.
int64_t rank_share(const BatchRequest& request);
/// Where rank `rank`'s samples stand in every global batch of a stream of global batches (token
/// windows, text documents): `count` of them from `offset`. `shares` empty: equal shares
/// (rank_share's); else one positive count per rank summing to `global_batch` (UsageError
/// "shares" otherwise), rank r after ranks 0..r-1's.
struct RankSlice {
  int64_t offset = 0;
  int64_t count = 0;
};
RankSlice rank_slice(int64_t global_batch, int rank, int world_size, const std::vector<int64_t>& shares);
/// The request's global batch: given, or the shares' sum; nullopt when neither says.
std::optional<int64_t> global_batch_of(const BatchRequest& request);
/// `shares` as given: each rank's count, or `auto` (by each rank's measured speed), or none.
struct SharesOption {
  std::vector<int64_t> counts;  ///< one per rank; empty: equal shares (or by speed)
  bool by_speed = false;        ///< auto: proportional to each rank's samples/s at its micro-batch
  bool given() const { return by_speed || !counts.empty(); }
};

/// "48,16" -> counts {48, 16}; "auto" -> by_speed; empty text: none. UsageError("shares") names
/// the value that is not a positive whole number.
SharesOption parse_shares(const std::string& text);

/// `global_batch` split in proportion to each rank's samples/s (largest remainders; every rank at
/// least 1): ranks of unequal speed then finish their part of a step together. UsageError when
/// the batch has fewer samples than ranks or a speed is not positive.
std::vector<int64_t> shares_by_speed(int64_t global_batch, const std::vector<double>& samples_per_s);

/// Checks what can be checked before the micro-batch is known: each given count positive, a global
/// batch the ranks share equally, and micro-batch x accumulation = share when all three are
/// given. A micro-batch that does not divide the share is fine: the last one is shorter.
void check_batch_request(const BatchRequest& request);

/// The largest micro-batch the request allows (its rank share when a global batch is given, the
/// largest share with `shares`: the same on every rank; nullopt: no limit) — the cap of a search
/// for the micro-batch.
std::optional<int64_t> micro_batch_limit(const BatchRequest& request);

/// The plan with `micro_batch` (the request's, or the search's choice when it had none). A global
/// batch that the micro-batch does not divide gets the accumulation that covers it with a
/// smaller last micro-batch (the optimizer still sees the exact mean gradient).
BatchPlan plan_batches(const BatchRequest& request, int64_t micro_batch);

}  // namespace saturate

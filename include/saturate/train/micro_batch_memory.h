// Implements: what an out-of-memory in the middle of a run teaches (issue #26's OOM guard),
// shared by `saturate train`'s back-off and the guard around a user's own step (Python's
// saturate.OomGuard). A batch that ran out of memory is split into micro-batches whose
// gradients accumulate to the same update (the global batch is kept); the micro-batch that
// worked is remembered in tokens (items x length; length 1 for fixed-size items), so a later
// batch that costs as much or more starts at a micro-batch of that many tokens, and a cheaper
// one still runs whole: one long batch does not slow the rest of the epoch.
#pragma once
#include <cstdint>
#include <vector>

namespace saturate {

class MicroBatchMemory {
 public:
  struct Backoff {
    int64_t rows = 0;    ///< items in the batch that ran out of memory
    int64_t length = 0;  ///< its length (tokens per item; 1 for fixed-size items)
    int64_t old_micro_batch = 0;
    int64_t new_micro_batch = 0;  ///< 0: the micro-batch was already 1
  };

  /// The micro-batch to start a batch of `rows` items of `length` with: `rows` (whole) until an
  /// out-of-memory at this cost or below was seen. UsageError for rows or length below 1.
  int64_t micro_for(int64_t rows, int64_t length) const;
  /// Micro-batch `micro` of a (rows, length) batch ran out of memory: the next to try (half,
  /// rounded up), or 0 when `micro` was 1 and there is nothing smaller. Remembered.
  int64_t after_oom(int64_t rows, int64_t length, int64_t micro);
  /// Micro-batch `micro` of a (rows, length) batch ran: remembered as a size that works.
  void after_success(int64_t rows, int64_t length, int64_t micro);

  /// The smallest micro-batch cost (items x length) that ran out of memory (0: none yet).
  int64_t failed_tokens() const { return failed_tokens_; }
  /// The largest cost below failed_tokens() that ran (0: none yet).
  int64_t working_tokens() const { return working_tokens_; }
  const std::vector<Backoff>& backoffs() const { return backoffs_; }

 private:
  int64_t failed_tokens_ = 0;
  int64_t working_tokens_ = 0;
  std::vector<Backoff> backoffs_;
};

}  // namespace saturate

#include "saturate/train/micro_batch_memory.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

void check_shape(int64_t rows, int64_t length) {
  if (rows < 1) throw UsageError("rows", fmt::format("{} is not a positive number of items", rows));
  if (length < 1) throw UsageError("length", fmt::format("{} is not a positive length", length));
}

}  // namespace

int64_t MicroBatchMemory::micro_for(int64_t rows, int64_t length) const {
  check_shape(rows, length);
  if (failed_tokens_ == 0 || rows * length < failed_tokens_) return rows;
  // as many items of this length as the tokens that worked; below any that ran, half the failure's
  const int64_t tokens = working_tokens_ > 0 ? working_tokens_ : failed_tokens_ / 2;
  return std::clamp<int64_t>(tokens / length, 1, rows);
}

int64_t MicroBatchMemory::after_oom(int64_t rows, int64_t length, int64_t micro) {
  check_shape(rows, length);
  micro = std::clamp<int64_t>(micro, 1, rows);
  const int64_t cost = micro * length;
  if (failed_tokens_ == 0 || cost < failed_tokens_) failed_tokens_ = cost;
  if (working_tokens_ >= failed_tokens_) working_tokens_ = 0;  // what worked once did not hold
  const int64_t next = micro == 1 ? 0 : (micro + 1) / 2;
  backoffs_.push_back({rows, length, micro, next});
  return next;
}

void MicroBatchMemory::after_success(int64_t rows, int64_t length, int64_t micro) {
  check_shape(rows, length);
  const int64_t cost = std::clamp<int64_t>(micro, 1, rows) * length;
  if (failed_tokens_ == 0 || cost < failed_tokens_) working_tokens_ = std::max(working_tokens_, cost);
}

}  // namespace saturate

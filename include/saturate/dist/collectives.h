// Implements: the few collectives that rank-synced decisions need, on plain integers, so the
// logic that uses them (rank-synced search, the fault messages) stays free of LibTorch and can
// be tested in one process with a fake. The real one is a c10d process group (dist/process_group.h).
#pragma once
#include <cstdint>
#include <vector>

namespace saturate {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Element-wise maximum over all ranks; every rank gets the result. Blocks until every rank
  /// calls it, or the timeout passes (throws RuntimeFailure naming the rank that is gone).
  virtual std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& values) = 0;
  /// Every rank's `values` (all of the same length), concatenated in rank order.
  virtual std::vector<int64_t> all_gather(const std::vector<int64_t>& values) = 0;
};

/// One process: the collectives are the identity.
class SingleProcessCollectives final : public Collectives {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& v) override { return v; }
  std::vector<int64_t> all_gather(const std::vector<int64_t>& v) override { return v; }
};

}  // namespace saturate

// Implements: the CPU proxy for launch overhead. LibTorch's RecordFunction hooks count every
// op dispatched while counting is on (a global callback; it costs a little per op, so the
// observer counts on a warm-up step only), and a one-off calibration measures what one op of
// the smallest kind costs (dispatch, autograd bookkeeping, allocation; 1-element tensors, so
// the arithmetic is nil). ops x per-op cost estimates the time a step spends launching work
// rather than doing it (docs/monitor.md). No LibTorch in this header.
#pragma once
#include <cstdint>

namespace saturate {

class OpCounter {
 public:
  OpCounter() = default;
  ~OpCounter();  ///< stops counting
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  /// Counts from now (every thread); one counter at a time per process.
  void start();
  /// Stops; returns the ops counted since start().
  int64_t stop();
  bool running() const { return handle_ != 0; }

 private:
  uint64_t handle_ = 0;
};

/// Microseconds one minimal op costs on the CPU, forward, backward and update included
/// (calibrated once per process, ~20 ms; the fastest of several repetitions).
double per_op_overhead_us();

}  // namespace saturate

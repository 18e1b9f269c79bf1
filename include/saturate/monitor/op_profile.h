// Implements: an operator profile of a stretch of training, from LibTorch's own profiler
// (Kineto, CPU activity: every op the starting thread dispatches, autograd's CPU backward
// included, which runs on that thread), reduced to one row per op name:
// calls, self time (its own time, ops nested in it subtracted) and total time. The same
// reduction as torch.profiler's key_averages() in Python, so that a C++ run and a Python loop
// can be compared op by op (bench/train_vs_python.py). No LibTorch in this header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace saturate {

struct OpRow {
  std::string name;
  int64_t calls = 0;
  double self_ms = 0;   ///< this op's own time: its span minus the spans of ops nested in it
  double total_ms = 0;  ///< its spans, nested ops included
};

struct OpTable {
  std::vector<OpRow> rows;  ///< by self time, largest first
  double wall_ms = 0;       ///< from start() to stop()
  double self_ms_total = 0; ///< the sum of every row's self time (every thread)
  int64_t threads = 0;      ///< threads that ran ops
};

/// One profile at a time per process: start() turns LibTorch's profiler on, stop() turns it off
/// and reduces its events. Throws RuntimeFailure when the profiler cannot start (another one
/// is running).
class OpProfile {
 public:
  OpProfile() = default;
  ~OpProfile();  ///< stops a profile still running (its events are dropped)
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  void start();
  OpTable stop();
  bool running() const { return running_; }

 private:
  bool running_ = false;
  int64_t started_ns_ = 0;
};

/// {"wall_ms", "self_ms_total", "threads", "ops": [{"name", "calls", "self_ms", "total_ms"}...]},
/// each time also divided by `steps` ("..._per_step") when steps > 0.
nlohmann::json op_table_json(const OpTable& t, int64_t steps);

}  // namespace saturate

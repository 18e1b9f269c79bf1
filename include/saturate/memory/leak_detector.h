// Implements: leak detection over a run of training steps (seed M2). Once warm, the bytes still
// allocated after each step must stay flat; a leak is steady growth, reported as bytes/step with
// the step where it started. Feed it one number per step; it can run for a whole training run
// (saturate train) and says once when a leak is first seen. No LibTorch.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace saturate {

struct LeakOptions {
  /// Steps that may still grow (optimizer state, caches) before memory must be flat.
  int warmup_steps = 3;
  /// Growth must last this many steps after warm-up to count.
  int min_growth_steps = 3;
  /// Growth below this many bytes per step is ignored (allocator noise).
  int64_t min_bytes_per_step = 1024;
};

struct LeakReport {
  bool detected = false;
  double bytes_per_step = 0;  ///< mean growth from the first growing step to the last step
  int64_t first_step = -1;    ///< the first step after which memory never came back down; -1: none
  int64_t steps = 0;          ///< steps observed
  int64_t warm_bytes = 0;     ///< allocated after the last warm-up step
  int64_t last_bytes = 0;     ///< allocated after the last step
};

class LeakDetector {
 public:
  explicit LeakDetector(LeakOptions options = {});
  /// Records the bytes allocated after step `step` (steps in increasing order).
  void observe(int64_t step, int64_t allocated_bytes);
  /// The verdict over everything observed so far.
  LeakReport report() const;
  /// True exactly once: the first time report().detected becomes true (warn once).
  bool warn_once();
  const std::vector<std::pair<int64_t, int64_t>>& samples() const { return samples_; }

 private:
  LeakOptions options_;
  std::vector<std::pair<int64_t, int64_t>> samples_;  ///< step, allocated bytes
  bool warned_ = false;
};

/// {"detected", "bytes_per_step", "first_step", "steps", "warm_bytes", "last_bytes"}.
nlohmann::json leak_json(const LeakReport& r);

}  // namespace saturate

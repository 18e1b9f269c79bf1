// A TrialRunner with a known memory law: peak(b) = fixed + per_sample*b + noise(b), rounded up to
// an allocator-like granularity. Noise is deterministic per batch and smaller than one sample,
// so peaks still grow with the batch. Time per step saturates: launch cost + b * per-sample cost.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "saturate/probe/trial.h"

namespace saturate::testing {

struct FakeLaw {
  int64_t fixed_bytes = 100 << 20;
  int64_t per_sample_bytes = 1300 << 10;
  int64_t granularity_bytes = 0;
  int64_t noise_bytes = 0;  ///< < per_sample_bytes
  int64_t budget_bytes = int64_t{4} << 30;
  double launch_ms = 5.0;
  double per_sample_ms = 0.05;
  double quadratic_bytes = 0;  ///< convexity: + quadratic * b^2 (workspaces that grow faster)
  /// Run-to-run variation: every trial after the first `shift_after_calls` peaks `shift_bytes`
  /// higher (or lower), as a CPU process whose kernels pick other buffers later on (-1: never).
  int shift_after_calls = -1;
  int64_t shift_bytes = 0;
  /// A peak the step reaches at every batch (a sharded step's gathered units and gradient buffers
  /// under checkpointing, a fused optimizer's temporaries): small batches all peak here, hiding
  /// the per-sample growth until the line crosses it.
  int64_t floor_bytes = 0;
};

class FakeRunner final : public TrialRunner {
 public:
  explicit FakeRunner(FakeLaw law) : law_(law) {}

  int64_t peak_bytes(int64_t batch) const {
    uint64_t h = static_cast<uint64_t>(batch) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    const int64_t noise = law_.noise_bytes ? static_cast<int64_t>(h % static_cast<uint64_t>(law_.noise_bytes)) : 0;
    int64_t bytes = law_.fixed_bytes + law_.per_sample_bytes * batch + noise +
                    static_cast<int64_t>(law_.quadratic_bytes * static_cast<double>(batch) * static_cast<double>(batch));
    bytes = std::max(bytes, law_.floor_bytes);
    if (law_.granularity_bytes) bytes = (bytes + law_.granularity_bytes - 1) / law_.granularity_bytes * law_.granularity_bytes;
    return bytes;
  }

  /// The test's oracle: the largest batch whose peak fits `limit`, by a plain scan.
  int64_t true_max(int64_t limit) const {
    int64_t b = 0;
    while (peak_bytes(b + 1) <= limit) ++b;
    return b;
  }

  Trial run(int64_t batch, const TrialRequest& request) override {
    ++calls;
    Trial t;
    t.batch = batch;
    t.budget_bytes = request.budget_bytes ? request.budget_bytes : law_.budget_bytes;
    const bool shifted = law_.shift_after_calls >= 0 && calls > law_.shift_after_calls;
    const int64_t peak = peak_bytes(batch) + (shifted ? law_.shift_bytes : 0);
    if (peak > t.budget_bytes) {
      t.status = TrialStatus::kOom;
      t.steps = 1;
      t.peak_allocated_bytes = t.peak_reserved_bytes = t.budget_bytes;
      return t;
    }
    t.status = TrialStatus::kOk;
    t.steps = request.warmup_steps + request.measure_steps;
    t.peak_allocated_bytes = t.peak_reserved_bytes = peak;
    t.baseline_bytes = law_.fixed_bytes / 4;
    t.step_time_ms = law_.launch_ms + law_.per_sample_ms * static_cast<double>(batch);
    t.samples_per_s = 1000.0 * static_cast<double>(batch) / t.step_time_ms;
    return t;
  }
  int64_t budget_bytes() const override { return law_.budget_bytes; }
  int64_t granularity_bytes() const override { return law_.granularity_bytes; }

  int calls = 0;

 private:
  FakeLaw law_;
};

}  // namespace saturate::testing

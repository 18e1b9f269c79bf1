// Implements: the result of running one configuration (a trial), and how a search asks for one.
// Everything above the probe reads only these structs; nothing here depends on LibTorch, so
// the search can be tested against a fake probe with a known memory law. Findings: findings.h.
#pragma once
#include <cstdint>
#include <string>

#include "saturate/probe/findings.h"

namespace saturate {

enum class TrialStatus {
  kOk,          ///< every step ran
  kOom,         ///< ran out of memory under the full budget
  kOverTarget,  ///< ran out of memory under a lowered budget (the target), used to bracket
                ///< the recommended batch cheaply; the batch may still fit the full budget
  kError,       ///< anything else (shape mismatch, NaN, ...); the message is kept
};
std::string to_string(TrialStatus s);
/// The status to_string wrote ("ok", "oom", "over-target", "error"); a UsageError naming the
/// value and the four allowed otherwise.
TrialStatus parse_trial_status(const std::string& text);

/// What the search asks of the probe.
struct TrialRequest {
  int warmup_steps = 1;   ///< untimed steps first (they also create the optimizer state)
  int measure_steps = 2;  ///< timed steps; the memory peak is taken over warm-up and these
  int64_t budget_bytes = 0;  ///< 0: the device budget; else run under this lower budget
};

struct Trial {
  int64_t batch = 0;
  TrialStatus status = TrialStatus::kError;
  double step_time_ms = 0;       ///< median over the measured steps (0 when none finished)
  double samples_per_s = 0;
  /// On a CPU device: the measured steps' time waiting for a CPU that another process held (the
  /// step's thread runnable on a run queue), summed, in ms; -1 where the kernel does not say
  /// (and on a GPU, whose step runs while its thread waits).
  double run_queue_wait_ms = -1;
  /// samples_per_s counting each step's time less its run-queue wait: the step's own speed
  /// beside other busy processes (equal to samples_per_s with the CPU to itself); 0 when unknown.
  double own_samples_per_s = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  /// The last step's peak (reserved) before its optimizer phase: the forward and backward, the
  /// part that grows with the batch, apart from the optimizer's temporaries that hide it under
  /// small batches. 0 when the step reported no optimizer phase (a user's step without phases).
  int64_t pre_optimizer_peak_bytes = 0;
  int64_t steps = 0;             ///< training steps actually run, including a failed one
  int64_t budget_bytes = 0;      ///< the budget the trial ran under
  int64_t baseline_bytes = 0;    ///< allocated bytes before the trial
  int64_t after_bytes = 0;       ///< allocated bytes after the trial was cleaned up
  /// Allocated bytes after the trial's last step minus after its first (0 with one step): what
  /// the step keeps alive from one call to the next (outputs or losses appended to a list).
  int64_t step_growth_bytes = 0;
  double seconds = 0;            ///< wall time of the whole trial
  std::string error;             ///< first line of the error for kOom/kOverTarget/kError
  TrialFindings findings;        ///< how the step was set up and what observers found (findings.h)
  bool ok() const { return status == TrialStatus::kOk; }
};

/// Runs trials; implemented by the real probe and by tests' fakes.
class TrialRunner {
 public:
  virtual ~TrialRunner() = default;
  virtual Trial run(int64_t batch, const TrialRequest& request) = 0;
  /// The device budget every trial runs under unless a request lowers it.
  virtual int64_t budget_bytes() const = 0;
  /// Allocation granularity of the device's allocator (0: exact, as the CPU budget is).
  virtual int64_t granularity_bytes() const { return 0; }
};

}  // namespace saturate

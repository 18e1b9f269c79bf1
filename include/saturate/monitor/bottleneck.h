// Implements: the bottleneck verdict of a measured configuration — why the device is not
// saturated — from step-phase times, the launch-overhead estimate and the sampled utilization.
// data-bound | launch-bound | compute-bound | memory-bound | communication-bound | balanced,
// with the numbers that decided it and the fix the seed gives (B3, B5, B6, B8, M9).
// Thresholds are documented in docs/monitor.md. No LibTorch here.
#pragma once
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace saturate {

enum class Bottleneck { kData, kLaunch, kCompute, kMemory, kCommunication, kBalanced };
/// "data-bound", "launch-bound", "compute-bound", "memory-bound", "communication-bound", "balanced".
std::string to_string(Bottleneck b);
/// The inverse of to_string; throws UsageError listing the allowed names.
Bottleneck parse_bottleneck(const std::string& text);

/// Decision thresholds (docs/monitor.md explains each).
struct BottleneckThresholds {
  double data_share = 0.30;           ///< (data_wait + h2d) / step at or above: data-bound
  double communication_share = 0.30;  ///< allreduce / step at or above: communication-bound
  double launch_fraction_cpu = 0.50;  ///< CPU: estimated dispatch overhead / compute time
  double launch_fraction_gpu = 0.80;  ///< GPU: host issue time / device busy span
  double busy_gpu_util = 80;          ///< NVML GPU-Util at or above: the device is busy
  double memory_util = 60;            ///< ... and memory-controller util at or above: memory-bound
  double compute_share = 0.60;        ///< CPU: compute phases x (1 - launch fraction) / step
};

/// What one probe measured, per step (means over the measured steps unless said).
struct StepProfile {
  double step_ms = 0;  ///< whole step
  double data_wait_ms = 0, h2d_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0, allreduce_ms = 0;
  bool on_gpu = false;
  /// Share of the compute phases lost to launching work rather than doing it, in [0, 1];
  /// NaN when not measured. CPU: ops x calibrated per-op cost / compute time; GPU: host issue
  /// time / device time of the compute phases.
  double launch_fraction = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json launch_evidence = nlohmann::json::object();  ///< how launch_fraction was found
  double gpu_util_percent = std::numeric_limits<double>::quiet_NaN();  ///< NVML mean, NaN without
  double mem_util_percent = std::numeric_limits<double>::quiet_NaN();
  double cpu_percent = std::numeric_limits<double>::quiet_NaN();
  double compute_ms() const { return forward_ms + backward_ms + optimizer_ms; }
};

struct Verdict {
  Bottleneck kind = Bottleneck::kBalanced;
  std::string reason;                                   ///< one line with the deciding numbers
  nlohmann::json evidence = nlohmann::json::object();  ///< every number looked at
  std::string fix;                                      ///< what to change (from the seed)
};

Verdict classify_bottleneck(const StepProfile& p, const BottleneckThresholds& t = {});
/// {"verdict", "reason", "evidence", "fix"}: the trial JSON's `bottleneck`.
nlohmann::json verdict_json(const Verdict& v);
/// The fix the seed gives for each kind.
std::string bottleneck_fix(Bottleneck b, bool on_gpu);

}  // namespace saturate

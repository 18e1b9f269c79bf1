// Implements: the bottleneck verdict of a measured configuration — why the device is not
// saturated — from step-phase times, the launch-overhead estimate and the sampled utilization.
// data-bound | launch-bound | compute-bound | memory-bound | communication-bound | balanced,
// or borderline (between two or more of these, when a deciding share sits within a factor of
// its threshold or two causes are about as large), with the numbers that decided it and the
// fix the seed gives (B3, B5, B6, B8, M9).
// Thresholds are documented in docs/monitor.md. No LibTorch here.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "saturate/probe/findings.h"

namespace saturate {

enum class Bottleneck { kData, kLaunch, kCompute, kMemory, kCommunication, kBalanced, kBorderline };
/// "data-bound", "launch-bound", "compute-bound", "memory-bound", "communication-bound", "balanced",
/// "borderline".
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
  /// The process's system CPU time / its CPU time at or above, with at least `page_faults_per_step`
  /// minor faults per step: freed memory goes back to the kernel and is faulted in again every
  /// step (glibc trimming or unmapping); the fix gets a note (docs/train.md: a Python loop's
  /// mlp step spent 22-27 % of its CPU time in the kernel).
  double system_cpu_share = 0.05;
  double page_faults_per_step = 1000;
  /// A share (or the launch fraction) in [threshold / f, threshold x f) is near its threshold:
  /// noise could put it either side, so a decision resting on it is borderline; and a cause
  /// over its threshold wins clearly only when it is over f times the share of every rival.
  double borderline_factor = 1.25;
};

/// What one probe measured, per step (means over the measured steps unless said).
struct StepProfile {
  double step_ms = 0;  ///< whole step
  double data_wait_ms = 0, h2d_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0, allreduce_ms = 0;
  bool on_gpu = false;
  bool mixed_precision = false;  ///< the step runs in bf16 or fp16 (autocast)
  /// Share of the compute phases lost to launching work rather than doing it, in [0, 1];
  /// NaN when not measured. CPU: ops x calibrated per-op cost / compute time; GPU: host issue
  /// time / device time of the compute phases.
  double launch_fraction = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json launch_evidence = nlohmann::json::object();  ///< how launch_fraction was found
  double gpu_util_percent = std::numeric_limits<double>::quiet_NaN();  ///< NVML mean, NaN without
  double mem_util_percent = std::numeric_limits<double>::quiet_NaN();
  double cpu_percent = std::numeric_limits<double>::quiet_NaN();
  /// The process's minor page faults per timed step and system CPU time / CPU time (user +
  /// system) over the timed steps (NaN: not measured).
  double page_faults_per_step = std::numeric_limits<double>::quiet_NaN();
  double system_cpu_share = std::numeric_limits<double>::quiet_NaN();
  double compute_ms() const { return forward_ms + backward_ms + optimizer_ms; }
};

struct Verdict {
  Bottleneck kind = Bottleneck::kBalanced;
  std::string reason;                                   ///< one line with the deciding numbers
  nlohmann::json evidence = nlohmann::json::object();  ///< every number looked at
  std::string fix;                                      ///< what to change (from the seed)
  std::vector<Bottleneck> between;  ///< borderline: the verdicts it lies between (largest share first)
};

Verdict classify_bottleneck(const StepProfile& p, const BottleneckThresholds& t = {});
/// The verdict as a trial finding (its words); to_json gives the trial JSON's `bottleneck`:
/// {verdict, reason, evidence, fix} (and between when borderline); evidence.shares gives every
/// cause's share of the step.
BottleneckFinding bottleneck_finding(const Verdict& v);
/// The fix the seed gives for each kind (borderline: see borderline_fix). `mixed_precision`: the
/// step already runs in bf16 or fp16, so mixed precision is not offered (issue 27: a bf16 run was
/// told to "use mixed precision (bf16)").
std::string bottleneck_fix(Bottleneck b, bool on_gpu, bool mixed_precision = false);
/// The fixes of the verdicts a borderline case lies between, in order.
std::string borderline_fix(const std::vector<Bottleneck>& between, bool on_gpu, bool mixed_precision = false);

}  // namespace saturate

// Implements: the bottleneck verdict for a job saturate did not start and cannot hook (`saturate
// monitor -- CMD`, `--pid`), from what can be seen from outside: the GPU's busy share (NVML), the
// process tree's CPU time against the cores, and its resident memory. Its phases (data wait,
// forward, backward, optimizer) cannot be seen from outside; the verdict says so and how to get
// them (saturate.monitor() in the job's loop).
#pragma once
#include "saturate/probe/findings.h"

namespace saturate {

/// Shares that decide (the same thresholds as the hooked verdicts where they overlap).
struct ExternalVerdictOptions {
  double busy_fraction = 0.85;      ///< a core (or the GPU) counts as saturated above this
  double gpu_busy_fraction = 0.80;  ///< the GPU's utilization that counts as saturated
  double idle_fraction = 0.30;      ///< under this share of one core the job mostly waits
};

/// `u`: the run's utilization summary (cpu_percent, and gpu_util_percent when NVML was read);
/// `cores`: the CPUs the job may use. Verdicts: gpu-bound, cpu-bound (every core busy),
/// one-thread-bound (one core busy of several: the GPU or the other cores wait on it), waiting
/// (neither busy), partly-busy, or not-measured (no samples).
BottleneckFinding external_job_verdict(const Utilization& u, int cores, const ExternalVerdictOptions& options = {});

}  // namespace saturate

// Implements: the device's measured matrix-product rate, the denominator of MFU (model FLOPs
// utilization). Measured rather than read from a datasheet: a square product as large as the
// device needs to reach its rate, in the dtype a step of the given precision multiplies in
// (fp32; TF32 tensor cores when tf32 is on; bf16; fp16), the best of several timed repetitions.
// On a CPU this is the machine's GEMM rate with the current number of threads. The load it was
// measured under is recorded, and a step that outruns it has it measured again (checked_mfu).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "saturate/step/precision.h"

namespace saturate {

struct GemmPeak {
  double flops_per_s = 0;
  std::string dtype;   ///< "fp32", "tf32", "bf16", "fp16"
  int64_t size = 0;    ///< n of the n x n x n product
  int repetitions = 0;
  int threads = 0;     ///< the CPU threads it ran with (at::get_num_threads)
  /// Other processes' busy CPUs while it ran (-1: unknown): a peak measured under load is low,
  /// and a step timed in a quieter moment then seems to outrun it.
  double others_busy_cpus = -1;
  /// When measured again because a step outran it: the first measurement (0: measured once).
  double first_flops_per_s = 0;
  /// One line: "measured: bf16 GEMM 8192^3, best of 10, 16 threads", with the load when other
  /// processes kept a quarter of a CPU or more busy, and the first measurement when measured again.
  std::string method() const;
};

/// Measures once per process for each device and dtype (later calls return the first result);
/// `again`: measures anew and keeps the new result for later calls. `tf32` asks for fp32 products
/// on TF32 tensor cores (CUDA only; ignored on CPU).
GemmPeak measure_gemm_peak(const c10::Device& device, Precision precision, bool tf32 = false, bool again = false);

/// MFU that cannot exceed 100 %: when `achieved` exceeds `peak` (a peak measured under load, a
/// step timed in a quieter moment), `remeasure` (may be empty) measures the peak again and `peak`
/// becomes the higher of the two, the first kept in first_flops_per_s. When the step still
/// outruns it, its FLOP count or its time is wrong: nullopt, and `why` says so. nullopt without a
/// word when either number is unknown.
std::optional<double> checked_mfu(double achieved_flops_per_s, GemmPeak& peak,
                                  const std::function<GemmPeak()>& remeasure, std::string* why);

}  // namespace saturate

// Implements: the device's measured matrix-product rate, the denominator of MFU (model FLOPs
// utilization). Measured rather than read from a datasheet: a square product as large as the
// device needs to reach its rate, in the dtype a step of the given precision multiplies in
// (fp32; TF32 tensor cores when tf32 is on; bf16; fp16), the best of several timed repetitions.
// On a CPU this is the machine's GEMM rate with the current number of threads.
#pragma once
#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "saturate/step/precision.h"

namespace saturate {

struct GemmPeak {
  double flops_per_s = 0;
  std::string dtype;   ///< "fp32", "tf32", "bf16", "fp16"
  int64_t size = 0;    ///< n of the n x n x n product
  int repetitions = 0;
  /// One line: "measured: bf16 GEMM 8192^3, best of 10 on cuda:0".
  std::string method() const;
};

/// Measures once per process for each device and dtype (later calls return the first result).
/// `tf32` asks for fp32 products on TF32 tensor cores (CUDA only; ignored on CPU).
GemmPeak measure_gemm_peak(const c10::Device& device, Precision precision, bool tf32 = false);

/// achieved / peak, 0 when either is unknown.
double model_flops_utilization(double achieved_flops_per_s, const GemmPeak& peak);

}  // namespace saturate

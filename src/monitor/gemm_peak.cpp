#include "saturate/monitor/gemm_peak.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include "saturate/core/units.h"
#include "saturate/monitor/proc_stats.h"

namespace saturate {
namespace {

void sync(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

GemmPeak measure(const c10::Device& device, const std::string& dtype_name, torch::ScalarType dtype, bool tf32) {
  GemmPeak peak;
  peak.dtype = dtype_name;
  peak.size = device.is_cuda() ? 8192 : 1024;
  peak.repetitions = 10;  // the best of 10: a shared machine's slow moments drop out
  // TF32 only for this measurement when asked; the step's own setting is put back after
  auto& ctx = at::globalContext();
  const bool was_tf32 = ctx.allowTF32CuBLAS();
  if (device.is_cuda()) ctx.setAllowTF32CuBLAS(tf32);
  peak.threads = at::get_num_threads();
  const OthersCpuMeter others;
  torch::NoGradGuard no_grad;
  const auto opts = torch::TensorOptions().dtype(dtype).device(device);
  const torch::Tensor a = torch::randn({peak.size, peak.size}, opts);
  const torch::Tensor b = torch::randn({peak.size, peak.size}, opts);
  torch::Tensor c = torch::mm(a, b);  // warm-up: kernels chosen, workspace allocated
  sync(device);
  const double flops = 2.0 * static_cast<double>(peak.size) * static_cast<double>(peak.size) * static_cast<double>(peak.size);
  double best_s = 0;
  for (int i = 0; i < peak.repetitions; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    sync(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (best_s == 0 || s < best_s) best_s = s;
  }
  if (device.is_cuda()) ctx.setAllowTF32CuBLAS(was_tf32);
  peak.flops_per_s = best_s > 0 ? flops / best_s : 0;
  peak.others_busy_cpus = others.busy_cpus();
  return peak;
}

}  // namespace

std::string GemmPeak::method() const {
  std::string s = fmt::format("measured: {} GEMM {}^3, best of {}, {} thread{}", dtype, size, repetitions, threads,
                              threads == 1 ? "" : "s");
  if (others_busy_cpus >= 0.25) s += fmt::format(", under load ({:.1f} other CPUs busy)", others_busy_cpus);
  if (first_flops_per_s > 0)
    s += fmt::format("; measured again: a step outran the first, {}/s", format_flops(first_flops_per_s));
  return s;
}

GemmPeak measure_gemm_peak(const c10::Device& device, Precision precision, bool tf32, bool again) {
  std::string name = "fp32";
  torch::ScalarType dtype = torch::kFloat;
  if (precision == Precision::kBf16) {
    name = "bf16";
    dtype = torch::kBFloat16;
  } else if (precision == Precision::kFp16) {
    name = "fp16";
    dtype = torch::kHalf;
  } else if (device.is_cuda() && (tf32 || precision == Precision::kTf32)) {
    name = "tf32";
  }
  static std::mutex mu;
  static std::map<std::tuple<c10::DeviceType, int, std::string>, GemmPeak> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device.type(), static_cast<int>(device.index()), name);
  auto it = cache.find(key);
  if (it != cache.end() && !again) return it->second;
  GemmPeak peak = measure(device, name, dtype, name == "tf32");
  cache[key] = peak;
  return peak;
}

std::optional<double> checked_mfu(double achieved, GemmPeak& peak, const std::function<GemmPeak()>& remeasure,
                                  std::string* why) {
  if (achieved <= 0 || peak.flops_per_s <= 0) return std::nullopt;
  if (achieved > peak.flops_per_s && remeasure) {
    GemmPeak again = remeasure();
    if (again.flops_per_s > peak.flops_per_s) {
      again.first_flops_per_s = peak.first_flops_per_s > 0 ? peak.first_flops_per_s : peak.flops_per_s;
      peak = again;
    } else if (peak.first_flops_per_s <= 0) {
      peak.first_flops_per_s = peak.flops_per_s;  // measured again, and no higher
    }
  }
  if (achieved > peak.flops_per_s) {
    if (why)
      *why = fmt::format("no MFU: the step's {}/s is above the GEMM peak measured {} ({}/s): its FLOP count or its "
                         "time is wrong",
                         format_flops(achieved), peak.first_flops_per_s > 0 ? "twice" : "once",
                         format_flops(peak.flops_per_s));
    return std::nullopt;
  }
  return achieved / peak.flops_per_s;
}

}  // namespace saturate

#include "saturate/monitor/bottleneck.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

double share(double part, double whole) { return whole > 0 ? std::clamp(part / whole, 0.0, 1.0) : 0.0; }
double r3(double v) { return std::isnan(v) ? v : std::round(v * 1000.0) / 1000.0; }

}  // namespace

std::string to_string(Bottleneck b) {
  switch (b) {
    case Bottleneck::kData: return "data-bound";
    case Bottleneck::kLaunch: return "launch-bound";
    case Bottleneck::kCompute: return "compute-bound";
    case Bottleneck::kMemory: return "memory-bound";
    case Bottleneck::kCommunication: return "communication-bound";
    case Bottleneck::kBalanced: return "balanced";
  }
  return "balanced";
}

Bottleneck parse_bottleneck(const std::string& text) {
  for (Bottleneck b : {Bottleneck::kData, Bottleneck::kLaunch, Bottleneck::kCompute, Bottleneck::kMemory,
                       Bottleneck::kCommunication, Bottleneck::kBalanced})
    if (to_string(b) == text) return b;
  throw UsageError("unknown bottleneck '" + text +
                   "' (expected data-bound, launch-bound, compute-bound, memory-bound, communication-bound or balanced)");
}

std::string bottleneck_fix(Bottleneck b, bool on_gpu) {
  switch (b) {
    case Bottleneck::kData:
      return "feed faster: more data-loader workers and prefetching, pinned host memory with non_blocking copies, "
             "cheaper or on-device augmentation, a faster shard format (seed B6)";
    case Bottleneck::kLaunch:
      return on_gpu ? "launch fewer, larger kernels: a larger batch, CUDA graphs, fused optimizers (foreach/fused "
                      "Adam), fewer small ops (seed B3: kernel-launch overhead at small batches)"
                    : "do more work per op: a larger batch, fewer and larger ops, fused optimizers; per-op framework "
                      "overhead dominates (seed B3: launch overhead at small batches)";
    case Bottleneck::kCompute:
      return on_gpu ? "the GPU is busy computing: mixed precision (bf16/fp16 on Tensor Cores, TF32), a more efficient "
                      "model; a larger batch no longer helps (seeds B3, B5)"
                    : "the processor is busy computing: mixed precision (bf16), more cores or a GPU, a more efficient "
                      "model; a larger batch no longer helps (seeds B3, B5)";
    case Bottleneck::kMemory:
      return "memory bandwidth limits: mixed precision (half the bytes moved), fused kernels and optimizers, "
             "channels_last for convolutions, a larger batch for more reuse (seeds B3, B5)";
    case Bottleneck::kCommunication:
      return "gradients wait on the network: a larger batch per GPU or gradient accumulation (fewer all-reduces per "
             "sample), bucketed all-reduce overlapped with backward, a faster interconnect (seeds B4, M10)";
    case Bottleneck::kBalanced:
      return "no single cause dominates: grow the batch while throughput rises (seed B1) and profile further (M9)";
  }
  return "";
}

Verdict classify_bottleneck(const StepProfile& p, const BottleneckThresholds& t) {
  Verdict v;
  const double step = p.step_ms > 0 ? p.step_ms
                                    : p.data_wait_ms + p.h2d_ms + p.compute_ms() + p.allreduce_ms;
  const double data = share(p.data_wait_ms + p.h2d_ms, step);
  const double comm = share(p.allreduce_ms, step);
  const double compute = share(p.compute_ms(), step);
  const double lf = std::isnan(p.launch_fraction) ? 0.0 : std::clamp(p.launch_fraction, 0.0, 1.0);
  const double launch = compute * lf;  // the share of the step lost to launching
  const double launch_limit = p.on_gpu ? t.launch_fraction_gpu : t.launch_fraction_cpu;
  const bool have_gpu_util = p.on_gpu && !std::isnan(p.gpu_util_percent);
  v.evidence = {{"step_ms", r3(step)},
                {"data_share", r3(data)},
                {"communication_share", r3(comm)},
                {"compute_share", r3(compute)},
                {"launch_fraction", std::isnan(p.launch_fraction) ? nlohmann::json() : nlohmann::json(r3(lf))},
                {"launch_share", r3(launch)}};
  if (!p.launch_evidence.empty()) v.evidence["launch"] = p.launch_evidence;
  if (!std::isnan(p.gpu_util_percent)) v.evidence["gpu_util_percent"] = r3(p.gpu_util_percent);
  if (!std::isnan(p.mem_util_percent)) v.evidence["mem_util_percent"] = r3(p.mem_util_percent);
  if (!std::isnan(p.cpu_percent)) v.evidence["cpu_percent"] = r3(p.cpu_percent);

  // the stall causes first: whichever over its threshold takes the largest share of the step.
  struct Candidate {
    Bottleneck kind;
    double share;
    bool over;
    std::string reason;
  };
  const Candidate candidates[] = {
      {Bottleneck::kData, data, data >= t.data_share,
       fmt::format("{:.0f} % of the step waits for data (threshold {:.0f} %)", 100 * data, 100 * t.data_share)},
      {Bottleneck::kCommunication, comm, comm >= t.communication_share,
       fmt::format("{:.0f} % of the step is all-reduce (threshold {:.0f} %)", 100 * comm,
                   100 * t.communication_share)},
      {Bottleneck::kLaunch, launch, !std::isnan(p.launch_fraction) && lf >= launch_limit,
       fmt::format("{:.0f} % of the compute time is launch overhead (threshold {:.0f} %)", 100 * lf,
                   100 * launch_limit)},
  };
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates)
    if (c.over && (!best || c.share > best->share)) best = &c;
  if (best) {
    v.kind = best->kind;
    v.reason = best->reason;
  } else if (have_gpu_util) {
    const bool busy = p.gpu_util_percent >= t.busy_gpu_util;
    if (busy && !std::isnan(p.mem_util_percent) && p.mem_util_percent >= t.memory_util) {
      v.kind = Bottleneck::kMemory;
      v.reason = fmt::format("GPU busy {:.0f} % with the memory controller busy {:.0f} % (thresholds {:.0f} %, {:.0f} %)",
                             p.gpu_util_percent, p.mem_util_percent, t.busy_gpu_util, t.memory_util);
    } else if (busy) {
      v.kind = Bottleneck::kCompute;
      v.reason = fmt::format("GPU busy {:.0f} % (threshold {:.0f} %), memory controller {:.0f} %", p.gpu_util_percent,
                             t.busy_gpu_util, p.mem_util_percent);
    } else {
      v.reason = fmt::format("GPU busy only {:.0f} % but no single cause over its threshold", p.gpu_util_percent);
    }
  } else {
    // no device counters (CPU, or a GPU without NVML): the arithmetic's share of the step.
    const double useful = compute * (1.0 - lf);
    v.evidence["useful_compute_share"] = r3(useful);
    if (useful >= t.compute_share) {
      v.kind = Bottleneck::kCompute;
      v.reason = fmt::format("{:.0f} % of the step is arithmetic (threshold {:.0f} %)", 100 * useful,
                             100 * t.compute_share);
    } else {
      v.reason = fmt::format("no single cause: data {:.0f} %, launch {:.0f} %, arithmetic {:.0f} % of the step",
                             100 * data, 100 * launch, 100 * useful);
    }
  }
  v.fix = bottleneck_fix(v.kind, p.on_gpu);
  return v;
}

nlohmann::json verdict_json(const Verdict& v) {
  return {{"verdict", to_string(v.kind)}, {"reason", v.reason}, {"evidence", v.evidence}, {"fix", v.fix}};
}

}  // namespace saturate

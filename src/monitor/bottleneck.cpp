#include "saturate/monitor/bottleneck.h"
#include "monitor/readings.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

double share(double part, double whole) { return whole > 0 ? std::clamp(part / whole, 0.0, 1.0) : 0.0; }

}  // namespace

std::string to_string(Bottleneck b) {
  switch (b) {
    case Bottleneck::kData: return "data-bound";
    case Bottleneck::kLaunch: return "launch-bound";
    case Bottleneck::kCompute: return "compute-bound";
    case Bottleneck::kMemory: return "memory-bound";
    case Bottleneck::kCommunication: return "communication-bound";
    case Bottleneck::kBalanced: return "balanced";
    case Bottleneck::kBorderline: return "borderline";
  }
  return "balanced";
}

Bottleneck parse_bottleneck(const std::string& text) {
  for (Bottleneck b : {Bottleneck::kData, Bottleneck::kLaunch, Bottleneck::kCompute, Bottleneck::kMemory,
                       Bottleneck::kCommunication, Bottleneck::kBalanced, Bottleneck::kBorderline})
    if (to_string(b) == text) return b;
  throw UsageError("unknown bottleneck '" + text +
                   "' (expected data-bound, launch-bound, compute-bound, memory-bound, communication-bound, balanced "
                   "or borderline)");
}

std::string bottleneck_fix(Bottleneck b, bool on_gpu, bool mixed_precision) {
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
      if (mixed_precision)
        return on_gpu ? "the GPU is busy computing, already in mixed precision: a more efficient model, fused kernels "
                        "(torch.compile), a faster GPU; a larger batch no longer helps (seeds B3, B5)"
                      : "the processor is busy computing, already in mixed precision: more cores or a GPU, a more "
                        "efficient model; a larger batch no longer helps (seeds B3, B5)";
      return on_gpu ? "the GPU is busy computing: mixed precision (bf16/fp16 on Tensor Cores, TF32), a more efficient "
                      "model; a larger batch no longer helps (seeds B3, B5)"
                    : "the processor is busy computing: mixed precision (bf16), more cores or a GPU, a more efficient "
                      "model; a larger batch no longer helps (seeds B3, B5)";
    case Bottleneck::kMemory:
      return fmt::format("memory bandwidth limits: {}fused kernels and optimizers, channels_last for convolutions, a "
                         "larger batch for more reuse (seeds B3, B5)",
                         mixed_precision ? "" : "mixed precision (half the bytes moved), ");
    case Bottleneck::kCommunication:
      return "gradients wait on the network: a larger batch per GPU or gradient accumulation (fewer all-reduces per "
             "sample), bucketed all-reduce overlapped with backward, a faster interconnect (seeds B4, M10)";
    case Bottleneck::kBalanced:
      return "no single cause dominates: grow the batch while throughput rises (seed B1) and profile further (M9)";
    case Bottleneck::kBorderline:
      return "the causes it lies between are about as large: try the fix of each, largest share first (M9)";
  }
  return "";
}

namespace {

/// Where a fraction sits against its threshold t: clearly under (< t/f), near, clearly over
/// (>= t*f, or halfway from t to 1 for a high threshold, which t*f would put out of reach).
enum class Side { kUnder, kNear, kOver };
Side side_of(double value, double threshold, double f) {
  if (value >= std::min(threshold * f, 0.5 * (threshold + 1.0))) return Side::kOver;
  if (value >= threshold / f) return Side::kNear;
  return Side::kUnder;
}

struct Cause {
  Bottleneck kind;
  double share;  ///< of the step: what the rivals compare
  Side side;
  std::string what;  ///< the deciding number against its threshold, in words
};

std::string names_of(const std::vector<Bottleneck>& kinds) {
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i)
    out += (i == 0 ? "" : i + 1 == kinds.size() ? " and " : ", ") + to_string(kinds[i]);
  return out;
}

}  // namespace

std::string borderline_fix(const std::vector<Bottleneck>& between, bool on_gpu, bool mixed_precision) {
  std::string out;
  for (Bottleneck b : between) {
    if (b == Bottleneck::kBorderline) continue;
    out += fmt::format("{}if {}: {}", out.empty() ? "" : "; ", to_string(b), bottleneck_fix(b, on_gpu, mixed_precision));
  }
  return out;
}

namespace {

/// The step's time split in shares (of the step); launch and arithmetic split the compute's share.
struct StepShares {
  double step_ms = 0, data = 0, comm = 0, compute = 0, lf = 0, launch = 0, useful = 0;
};

StepShares shares_of(const StepProfile& p) {
  StepShares s;
  s.step_ms = p.step_ms > 0 ? p.step_ms : p.data_wait_ms + p.h2d_ms + p.compute_ms() + p.allreduce_ms;
  s.data = share(p.data_wait_ms + p.h2d_ms, s.step_ms);
  s.comm = share(p.allreduce_ms, s.step_ms);
  s.compute = share(p.compute_ms(), s.step_ms);
  s.lf = std::isnan(p.launch_fraction) ? 0.0 : std::clamp(p.launch_fraction, 0.0, 1.0);
  s.launch = s.compute * s.lf;  // the share of the step lost to launching
  s.useful = s.compute * (1.0 - s.lf);
  return s;
}

nlohmann::json evidence_of(const StepProfile& p, const StepShares& s, double f) {
  nlohmann::json e = {
      {"step_ms", monitor_detail::round3(s.step_ms)},
      {"data_share", monitor_detail::round3(s.data)},
      {"communication_share", monitor_detail::round3(s.comm)},
      {"compute_share", monitor_detail::round3(s.compute)},
      {"launch_fraction", std::isnan(p.launch_fraction) ? nlohmann::json() : nlohmann::json(monitor_detail::round3(s.lf))},
      {"launch_share", monitor_detail::round3(s.launch)},
      {"shares", {{"data", monitor_detail::round3(s.data)},
                  {"communication", monitor_detail::round3(s.comm)},
                  {"launch", monitor_detail::round3(s.launch)},
                  {"arithmetic", monitor_detail::round3(s.useful)},
                  {"other", monitor_detail::round3(std::max(0.0, 1.0 - s.data - s.comm - s.compute))}}},
      {"borderline_factor", f}};
  if (!p.launch_evidence.empty()) e["launch"] = p.launch_evidence;
  if (!std::isnan(p.gpu_util_percent)) e["gpu_util_percent"] = monitor_detail::round3(p.gpu_util_percent);
  if (!std::isnan(p.mem_util_percent)) e["mem_util_percent"] = monitor_detail::round3(p.mem_util_percent);
  if (!std::isnan(p.cpu_percent)) e["cpu_percent"] = monitor_detail::round3(p.cpu_percent);
  return e;
}

/// The stall causes: each against its threshold, with a band of a factor f either side.
std::vector<Cause> stalls_of(const StepProfile& p, const BottleneckThresholds& t, const StepShares& s, double f) {
  std::vector<Cause> stalls = {
      {Bottleneck::kData, s.data, side_of(s.data, t.data_share, f),
       fmt::format("{:.0f} % of the step waits for data (threshold {:.0f} %)", 100 * s.data, 100 * t.data_share)},
      {Bottleneck::kCommunication, s.comm, side_of(s.comm, t.communication_share, f),
       fmt::format("{:.0f} % of the step is all-reduce (threshold {:.0f} %)", 100 * s.comm,
                   100 * t.communication_share)},
  };
  const double launch_limit = p.on_gpu ? t.launch_fraction_gpu : t.launch_fraction_cpu;
  if (!std::isnan(p.launch_fraction))
    stalls.push_back({Bottleneck::kLaunch, s.launch, side_of(s.lf, launch_limit, f),
                      fmt::format("{:.0f} % of the compute time is launch overhead (threshold {:.0f} %)", 100 * s.lf,
                                  100 * launch_limit)});
  return stalls;
}

/// When no stall decides: the device's own state (NVML), else the arithmetic's share. `between`:
/// the verdicts the fallback itself lies between (empty: it is clear).
Cause fallback_of(const StepProfile& p, const BottleneckThresholds& t, const StepShares& s, double f,
                  std::vector<Bottleneck>& between, nlohmann::json& evidence) {
  Cause fallback{Bottleneck::kBalanced, s.useful, Side::kUnder, ""};
  if (p.on_gpu && !std::isnan(p.gpu_util_percent)) {
    const bool busy = p.gpu_util_percent >= t.busy_gpu_util;
    if (busy && !std::isnan(p.mem_util_percent) && p.mem_util_percent >= t.memory_util) {
      fallback.kind = Bottleneck::kMemory;
      fallback.what = fmt::format("GPU busy {:.0f} % with the memory controller busy {:.0f} % (thresholds {:.0f} %, {:.0f} %)",
                                  p.gpu_util_percent, p.mem_util_percent, t.busy_gpu_util, t.memory_util);
    } else if (busy) {
      fallback.kind = Bottleneck::kCompute;
      fallback.what = fmt::format("GPU busy {:.0f} % (threshold {:.0f} %), memory controller {:.0f} %",
                                  p.gpu_util_percent, t.busy_gpu_util, p.mem_util_percent);
    } else {
      fallback.what = fmt::format("GPU busy only {:.0f} % but no single cause over its threshold", p.gpu_util_percent);
    }
    return fallback;
  }
  // no device counters (CPU, or a GPU without NVML): the arithmetic's share of the step.
  evidence["useful_compute_share"] = monitor_detail::round3(s.useful);
  fallback.side = side_of(s.useful, t.compute_share, f);
  const std::string arithmetic =
      fmt::format("{:.0f} % of the step is arithmetic (threshold {:.0f} %)", 100 * s.useful, 100 * t.compute_share);
  if (fallback.side != Side::kUnder) {
    fallback.kind = Bottleneck::kCompute;
    fallback.what = arithmetic;
    if (fallback.side == Side::kNear) between = {Bottleneck::kCompute, Bottleneck::kBalanced};
  } else {
    fallback.what = fmt::format("no single cause: data {:.0f} %, launch {:.0f} %, arithmetic {:.0f} % of the step",
                                100 * s.data, 100 * s.launch, 100 * s.useful);
  }
  return fallback;
}

/// The verdict: the one stall clearly over its threshold with no rival within x f, else the
/// fallback when it is clear, else borderline between every cause noise could put first.
void decide(const std::vector<Cause>& stalls, const Cause& fallback, const std::vector<Bottleneck>& fallback_between,
            double f, Verdict& v) {
  const Cause* winner = nullptr;
  for (const Cause& c : stalls)
    if (c.side == Side::kOver && (!winner || c.share > winner->share)) winner = &c;
  std::vector<const Cause*> rivals;  // causes that noise could put in the winner's place
  for (const Cause& c : stalls)
    if (&c != winner && c.side != Side::kUnder && (!winner || c.share * f >= winner->share)) rivals.push_back(&c);
  if (winner && rivals.empty()) {
    v.kind = winner->kind;
    v.reason = winner->what;
    return;
  }
  if (!winner && rivals.empty() && fallback_between.empty()) {
    v.kind = fallback.kind;
    v.reason = fallback.what;
    return;
  }
  // borderline: name every verdict it lies between, the largest share first, with its number
  std::vector<const Cause*> in;
  if (winner) in.push_back(winner);
  in.insert(in.end(), rivals.begin(), rivals.end());
  std::stable_sort(in.begin(), in.end(), [](const Cause* a, const Cause* b) { return a->share > b->share; });
  std::vector<std::string> whats;
  for (const Cause* c : in) {
    v.between.push_back(c->kind);
    whats.push_back(c->what);
  }
  if (!winner) {  // no stall is clearly over: the fallback's verdict is the other side
    const std::vector<Bottleneck> others =
        fallback_between.empty() ? std::vector<Bottleneck>{fallback.kind} : fallback_between;
    for (Bottleneck b : others)
      if (std::find(v.between.begin(), v.between.end(), b) == v.between.end()) v.between.push_back(b);
    whats.push_back(fallback.what);
  }
  v.kind = Bottleneck::kBorderline;
  std::string joined;
  for (size_t i = 0; i < whats.size(); ++i) joined += (i ? "; " : "") + whats[i];
  v.reason = fmt::format("borderline between {} (a share within x{:g} of its threshold, or rivals within x{:g} of "
                         "each other): {}",
                         names_of(v.between), f, f, joined);
}

/// Memory handed back to the operating system and faulted in again every step: said beside the fix.
void add_page_fault_note(const StepProfile& p, const BottleneckThresholds& t, Verdict& v) {
  if (!std::isnan(p.page_faults_per_step)) v.evidence["page_faults_per_step"] = monitor_detail::round3(p.page_faults_per_step);
  if (!std::isnan(p.system_cpu_share)) v.evidence["system_cpu_share"] = monitor_detail::round3(p.system_cpu_share);
  if (!std::isnan(p.page_faults_per_step) && !std::isnan(p.system_cpu_share) &&
      p.page_faults_per_step >= t.page_faults_per_step && p.system_cpu_share >= t.system_cpu_share)
    v.fix += fmt::format(
        "; also: {:.0f} page faults per step and {:.0f} % of the CPU time in the kernel: freed memory goes back to the "
        "operating system and is faulted in again every step; keep it in the process (glibc: "
        "MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824 in the environment, or jemalloc/tcmalloc "
        "via LD_PRELOAD; docs/train.md)",
        p.page_faults_per_step, 100 * p.system_cpu_share);
}

}  // namespace

Verdict classify_bottleneck(const StepProfile& p, const BottleneckThresholds& t) {
  Verdict v;
  const double f = std::max(1.0, t.borderline_factor);
  const StepShares s = shares_of(p);
  v.evidence = evidence_of(p, s, f);
  std::vector<Bottleneck> fallback_between;
  const Cause fallback = fallback_of(p, t, s, f, fallback_between, v.evidence);
  decide(stalls_of(p, t, s, f), fallback, fallback_between, f, v);
  v.fix = v.kind == Bottleneck::kBorderline ? borderline_fix(v.between, p.on_gpu, p.mixed_precision)
                                             : bottleneck_fix(v.kind, p.on_gpu, p.mixed_precision);
  add_page_fault_note(p, t, v);
  return v;
}

BottleneckFinding bottleneck_finding(const Verdict& v) {
  BottleneckFinding f{to_string(v.kind), v.reason, v.evidence, v.fix, {}};
  for (Bottleneck b : v.between) f.between.push_back(to_string(b));
  return f;
}


}  // namespace saturate

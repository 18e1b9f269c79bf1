#include "monitor/external_verdict.h"

#include <algorithm>

#include <fmt/format.h>

namespace saturate {
namespace {

constexpr const char* kUnseen =
    "; from outside a job its phases (data wait, forward, backward, optimizer) cannot be seen: wrap its loop in "
    "saturate.monitor() (Python) for them";

}  // namespace

BottleneckFinding external_job_verdict(const Utilization& u, int cores, const ExternalVerdictOptions& o) {
  BottleneckFinding b;
  cores = std::max(1, cores);
  const UtilizationStat* cpu = u.field("cpu_percent");
  const UtilizationStat* gpu = u.source == "nvml" ? u.field("gpu_util_percent") : nullptr;
  if (!cpu || u.samples < 2) {
    b.verdict = "not-measured";
    b.reason = fmt::format("{} sample(s): the job ended before the sampler could measure it", u.samples);
    b.fix = "watch a longer run (a job shorter than two sampling intervals shows nothing)";
    return b;
  }
  const double cores_busy = cpu->mean / 100.0;  // cpu_percent: 100 = one core
  const double cpu_share = cores_busy / cores;
  b.evidence = {{"cpu_cores_busy", cores_busy}, {"cores", cores}, {"cpu_share", cpu_share}};
  if (gpu) b.evidence["gpu_util_percent"] = gpu->mean;
  const std::string cpu_words = fmt::format("{:.0f} % of one core busy on average ({:.2f} of {} cores)", cpu->mean,
                                            cores_busy, cores);
  const std::string gpu_words = gpu ? fmt::format("the GPU busy {:.0f} % of the time", gpu->mean) : "no GPU read";
  if (gpu && gpu->mean >= 100 * o.gpu_busy_fraction) {
    b.verdict = "gpu-bound";
    b.reason = fmt::format("{} (threshold {:.0f} %); {}", gpu_words, 100 * o.gpu_busy_fraction, cpu_words);
    b.fix = "the GPU is saturated: a larger batch only if memory allows (saturate search), mixed precision, or a "
            "faster GPU";
  } else if (cpu_share >= o.busy_fraction) {
    b.verdict = "cpu-bound";
    b.reason = fmt::format("every core is busy: {}; {}", cpu_words, gpu_words);
    b.fix = gpu ? "the CPU feeds the GPU too slowly: move data preparation to the GPU, cache decoded data, fewer "
                  "transforms per sample"
                : "the processor is busy computing: mixed precision (bf16), a larger batch per step, more cores or a "
                  "GPU";
  } else if (cores > 1 && cores_busy >= o.busy_fraction && cores_busy < 1.5) {
    b.verdict = "one-thread-bound";
    b.reason = fmt::format("one core is saturated and the others mostly idle: {}; {}", cpu_words, gpu_words);
    b.fix = "single-threaded work paces the job (a Python loop, data loading in the main process): DataLoader "
            "workers (num_workers), torch.set_num_threads, a larger batch per step";
  } else if (cores_busy < o.idle_fraction && (!gpu || gpu->mean < 100 * o.idle_fraction)) {
    b.verdict = "waiting";
    b.reason = fmt::format("neither the CPU nor the GPU is busy: {}; {}", cpu_words, gpu_words);
    b.fix = "the job mostly waits: on disk or network input, other ranks, a lock or a sleep; saturate cannot tell "
            "which from outside";
  } else {
    b.verdict = "partly-busy";
    b.reason = fmt::format("{}; {}", cpu_words, gpu_words);
    b.fix = "nothing is saturated: the job alternates between work and waits";
  }
  b.reason += kUnseen;
  return b;
}

}  // namespace saturate

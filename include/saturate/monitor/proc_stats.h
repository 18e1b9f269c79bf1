// Implements: what /proc says about a process (or a process and its descendants): CPU time
// and resident memory, the sampler's fallback when there is no NVML, and the process tree
// `saturate monitor` watches. Linux only; no LibTorch here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saturate {

struct ProcUsage {
  double cpu_time_s = 0;  ///< user + system time, including waited-for children
  int64_t rss_bytes = 0;
  bool alive = false;     ///< false when /proc/PID could not be read
};

/// The process `pid` alone, or summed with every live descendant.
ProcUsage read_proc_usage(int pid, bool include_descendants);
/// `root` and its live descendants (from the parent pids in /proc/*/stat).
std::vector<int> process_tree(int root);
/// Whether `pid` exists and is not a zombie.
bool process_alive(int pid);

/// How many CPUs `pid` may run on (its affinity mask; 0: this process); 0 when it cannot be read.
int allowed_cpus(int pid = 0);

/// Other processes' CPU use over an interval, in busy CPUs: the machine's busy time (/proc/stat:
/// user, nice, system, irq, softirq, steal) less this process's own CPU time, over the wall time.
/// What a measurement taken meanwhile competed with (google/benchmark warns of the same).
class OthersCpuMeter {
 public:
  OthersCpuMeter();  ///< starts the interval
  /// Since construction; -1 when /proc/stat cannot be read or no time passed.
  double busy_cpus() const;
  /// Wall seconds since construction.
  double elapsed_s() const;

 private:
  double machine_busy_s_ = -1;
  double own_s_ = 0;
  double wall_s_ = 0;
};

/// The CPU threads a step should use now (issue 27: on a busy machine all cores oversubscribe:
/// a 49k-weight MLP's step took 190 ms with 2 threads beside two busy processes, 1 ms with one).
struct CpuThreads {
  int threads = 0;                ///< what to set
  int allowed_cpus = 0;           ///< this process's affinity
  double others_busy_cpus = -1;   ///< other processes' busy CPUs over the sample (-1: not read)
  double sample_s = 0;            ///< how long the load was sampled
  std::string reason;             ///< "1 of 2 CPUs: 1.9 busy with other processes (over 0.10 s)"
};

/// From `others` (started before; at least `min_sample_s` are waited for): the CPUs this process
/// may use that others do not keep busy, rounded, at least 1 and at most `most` (LibTorch's own
/// count). Where others use under three quarters of a CPU, `most`.
CpuThreads choose_cpu_threads(const OthersCpuMeter& others, int most, double min_sample_s = 0.1);

}  // namespace saturate

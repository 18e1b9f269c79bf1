// Implements: what /proc says about a process (or a process and its descendants): CPU time
// and resident memory, the sampler's fallback when there is no NVML, and the process tree
// `saturate monitor` watches. Linux only; no LibTorch here.
#pragma once
#include <cstdint>
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

/// Other processes' CPU use over an interval, in busy CPUs: the machine's busy time (/proc/stat:
/// user, nice, system, irq, softirq, steal) less this process's own CPU time, over the wall time.
/// What a measurement taken meanwhile competed with (google/benchmark warns of the same).
class OthersCpuMeter {
 public:
  OthersCpuMeter();  ///< starts the interval
  /// Since construction; -1 when /proc/stat cannot be read or no time passed.
  double busy_cpus() const;

 private:
  double machine_busy_s_ = -1;
  double own_s_ = 0;
  double wall_s_ = 0;
};

}  // namespace saturate

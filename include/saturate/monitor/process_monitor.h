// Implements: `saturate monitor`'s engine. Runs any command (or attaches to a running
// process), samples it and its descendants (GPU through NVML, else CPU and memory from /proc)
// until it ends (the child dies with saturate: core/child_process.h), hands the latest sample per
// interval and every sample to the caller, and returns a summary and the child's exit status.
// Prints nothing itself. No LibTorch here.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/child_process.h"  // SpawnError
#include "saturate/core/errors.h"
#include "saturate/monitor/sampler.h"
#include "saturate/probe/findings.h"

namespace saturate {

struct WatchOptions {
  std::vector<std::string> command;  ///< run this (argv[0] looked up in PATH), or
  int pid = 0;                       ///< attach to this running process
  double sample_hz = 10;             ///< samples per second
  double interval_s = 1.0;           ///< a live line this often (0: none)
  int gpu_index = 0;                 ///< the GPU NVML reads
  std::string nvml_path;             ///< "" : $SATURATE_NVML_LIBRARY or libnvidia-ml.so.1
  /// Live lines (with interval_s > 0): once the sampler's source ("nvml" or "proc") is known,
  /// before the first interval (a header's moment) ...
  std::function<void(const std::string& source)> on_live_start;
  /// ... then the latest sample once per interval (report/monitor_text.h prints both).
  std::function<void(const Sample&, const std::string& source)> on_interval;
  /// Every sample, on the sampling thread (the CSV log).
  std::function<void(const Sample&, const std::string& source)> on_sample;
  /// Set (by a signal handler) to stop watching an attached process early.
  const std::atomic<bool>* stop = nullptr;
  /// Receives the child's pid once it runs (a signal handler forwards signals to it).
  std::atomic<int>* child_pid = nullptr;
};

struct WatchResult {
  int exit_status = 0;       ///< the child's exit code, or 128 + the signal that killed it; 0 attached
  std::string how_it_ended;  ///< "exited with status 3", "killed by signal 9 (Killed)", ...
  double seconds = 0;
  std::string source;        ///< "nvml" or "proc"
  std::string nvml_note;     ///< why NVML is not used, when it is not
  Utilization utilization;   ///< summarize_utilization over the whole run
  /// Why the job ran as it did, from outside (monitor/external_verdict.h).
  BottleneckFinding verdict;
};

/// Throws UsageError for an empty command with no pid or a pid that does not exist, SpawnError
/// when the command cannot start.
WatchResult watch_process(const WatchOptions& options);

}  // namespace saturate

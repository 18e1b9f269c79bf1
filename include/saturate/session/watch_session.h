// Implements: `saturate monitor` as one library call: run a command (or attach to a process) and
// sample the GPU (NVML) or the CPU and memory (/proc) until it ends, with live samples as events,
// every sample in a CSV log written row by row (a killed run keeps its rows), SIGINT, SIGTERM and
// SIGHUP handled as a watcher should (forwarded to the child, which is let finish so that the
// summary comes), and the child's exit status handed back.
#pragma once
#include <string>

#include "saturate/monitor/process_monitor.h"

namespace saturate {

struct WatchSessionOptions {
  /// What to watch and how often (command or pid, sample_hz, interval_s, gpu_index) and the live
  /// events; its stop flag and child pid are the session's.
  WatchOptions watch;
  std::string log;  ///< every sample to this CSV file ("": none)
  /// UsageError naming the option (before anything runs); the log's path is checked too.
  void check() const;
};

struct WatchSessionResult {
  WatchResult watch;
  std::string what;  ///< "pid 123" or the command's name
  /// "saturate: CMD exited with status 0 after 1.2 s" and the summary's lines.
  std::string text() const;
};

/// Watches until the command ends (or the attached process, or a signal); SpawnError when the
/// command cannot start, with the shell's exit status.
WatchSessionResult run_watch_session(WatchSessionOptions options);

}  // namespace saturate

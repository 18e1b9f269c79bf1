// Implements: starting and reaping child processes, for `saturate monitor` and `saturate launch`
// alike. A child starts with default signal dispositions and an empty signal mask (whatever
// handlers the parent installed), dies with its parent (PR_SET_PDEATHSIG: a SIGKILLed monitor or
// launcher leaves nothing running), optionally leads its own process group (so that the whole
// group can be signalled), and a command that cannot start is reported in the parent (SpawnError,
// 127 not found or 126 not executable, as shells say), not by a child that exits. POSIX only, no
// LibTorch; prints nothing.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "saturate/core/errors.h"

namespace saturate {

/// The command could not be started; `exit_status` follows the shells (127: not found,
/// 126: found but not executable).
class SpawnError : public RuntimeFailure {
 public:
  SpawnError(const std::string& what, int exit_status) : RuntimeFailure(what), exit_status(exit_status) {}
  int exit_status;
};

struct ChildOptions {
  std::vector<std::string> command;  ///< argv; argv[0] looked up in PATH
  /// Variables set (or replaced) in the child's environment, on top of this process's.
  std::map<std::string, std::string> extra_env;
  bool own_process_group = false;    ///< the child leads a new process group (pgid = its pid)
  int stderr_fd = -1;                ///< the child's stderr (dup2'd); -1: this process's
  std::string who = "saturate";      ///< names the starter in errors ("launch: cannot run ...")
};

/// Starts the child; throws SpawnError when it cannot run, UsageError for an empty command.
pid_t spawn_child(const ChildOptions& options);

/// How a child ended, from a waitpid status.
struct ChildExit {
  int exit_status = 0;   ///< its exit code, or 128 + the signal that ended it
  bool signaled = false;
  int signal = 0;
  std::string how;       ///< "exited with status 3", "was killed by signal 9 (Killed)"
};
ChildExit child_exit(int wait_status);

}  // namespace saturate

// Implements: `saturate launch`, a torchrun-compatible starter of data-parallel ranks.
// Starts nproc_per_node copies of a command on this node with the torchrun environment (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, ...), each in
// its own process group and killed if the launcher dies (PR_SET_PDEATHSIG); their stdout passes
// through, their stderr comes back line by line for a `[rank r/w host]` prefix (children start
// through core/child_process.h, as `saturate monitor`'s do). SIGINT, SIGTERM and SIGHUP are
// forwarded to every rank, the first and the second time (a saturate rank finishes its step and
// checkpoints on the first, stops at once on the second); a third kills every rank. Ranks that
// exit 128+N after signal N was forwarded stopped as asked: the launch returns 128+N. When a
// rank fails (non-zero status or a signal), the others get SIGTERM, then SIGKILL after a grace
// period, and the launch returns that rank's status (128+N for signal N). No LibTorch; the
// library prints nothing (lines go to sinks).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace saturate {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  /// Rendezvous host: rank 0's node. Loopback by default (one node).
  std::string master_addr = "127.0.0.1";
  /// 0: a free port on this host (one node only); else the port every node agrees on.
  int master_port = 0;
  /// The command each rank runs (argv); searched in PATH.
  std::vector<std::string> command;
  /// Seconds between SIGTERM and SIGKILL when ranks are stopped.
  double kill_grace_s = 5;
  /// Extra variables for every rank.
  std::map<std::string, std::string> extra_env;
};

struct RankExit {
  int rank = 0;
  int pid = 0;
  int exit_status = 0;  ///< 128+N when ended by signal N
  bool signaled = false;
  int signal = 0;
  bool stopped_by_launcher = false;  ///< ended because another rank failed
};

struct LaunchResult {
  int exit_status = 0;     ///< 0, or the status of the first rank that failed
  int failed_rank = -1;    ///< -1 when every rank succeeded
  std::string summary;     ///< one line: what happened
  std::vector<RankExit> ranks;
  int master_port = 0;     ///< the port used
};

struct LaunchSinks {
  /// One line of a rank's stderr (without the newline).
  std::function<void(int rank, const std::string& line)> rank_line;
  /// A launcher message (a rank failed, ranks being stopped, a signal forwarded).
  std::function<void(const std::string& line)> note;
};

/// The most ranks one node may start: 4 per core, and one per 256 MiB of memory.
int max_ranks_per_node();

/// Checks the options; throws UsageError naming the flag.
void check_launch_options(const LaunchOptions& options);

/// The variables rank `local_rank` of this node gets (torchrun's set).
std::map<std::string, std::string> rank_environment(const LaunchOptions& options, int local_rank, int master_port);

/// A free TCP port on `host` (bound to port 0 and read back).
int free_port(const std::string& host = "127.0.0.1");

/// "[rank 1/4 host] " for a rank's lines.
std::string rank_prefix(int rank, int world_size, const std::string& host);

/// Runs the ranks to the end. Installs handlers for SIGINT, SIGTERM and SIGHUP while it runs.
LaunchResult launch(const LaunchOptions& options, const LaunchSinks& sinks);

}  // namespace saturate

// saturate launch: start data-parallel ranks with torchrun's environment (see dist/launch.h).
#include <unistd.h>

#include <iostream>
#include <mutex>

#include <fmt/format.h>

#include "commands.h"
#include "flag_checks.h"
#include "saturate/core/errors.h"
#include "saturate/dist/launch.h"

namespace saturate::cli {

void add_launch_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch", "Start data-parallel ranks (torchrun's environment): saturate launch --nproc-per-node N -- saturate train ...");
  auto o = std::make_shared<LaunchOptions>();
  cmd->add_option("--nproc-per-node", o->nproc_per_node, "ranks on this node (one per GPU)")
      ->capture_default_str()
      ->envname("SATURATE_NPROC_PER_NODE");
  cmd->add_option("--nnodes", o->nnodes, "nodes in the job (run one launch per node)")->check(in_range(1, 1e6, "nodes"))->capture_default_str();
  cmd->add_option("--node-rank", o->node_rank, "this node's index, 0..nnodes-1")->check(in_range(0, 1e6, "this node's index"))->capture_default_str();
  cmd->add_option("--master-addr", o->master_addr, "rank 0's host: the rendezvous (TCPStore) binds there")
      ->capture_default_str()
      ->envname("MASTER_ADDR");
  cmd->add_option("--master-port", o->master_port, "rendezvous port (0: a free one; needed with --nnodes > 1)")->check(in_range(0, 65535, "a TCP port; 0: a free one"))
      ->capture_default_str();
  cmd->add_option("--kill-grace", o->kill_grace_s, "seconds between SIGTERM and SIGKILL when ranks are stopped")->check(in_range(0, 3600, "seconds"))
      ->capture_default_str();
  cmd->add_option("command", o->command, "the command each rank runs, after '--'");
  cmd->callback([o, &action] {
    action = [o]() -> int {
      char buf[256] = {0};
      gethostname(buf, sizeof(buf) - 1);
      const std::string host = buf;
      const int world = o->nnodes * o->nproc_per_node;
      std::mutex mu;
      LaunchSinks sinks;
      sinks.rank_line = [&](int rank, const std::string& line) {
        std::lock_guard<std::mutex> lock(mu);
        std::cerr << rank_prefix(rank, world, host) << line << std::endl;
      };
      sinks.note = [&](const std::string& line) {
        std::lock_guard<std::mutex> lock(mu);
        std::cerr << "saturate: " << line << std::endl;
      };
      const LaunchResult r = launch(*o, sinks);
      if (r.failed_rank >= 0) std::cerr << "saturate: error: launch: " << r.summary << "\n";
      return r.exit_status;
    };
  });
}

}  // namespace saturate::cli

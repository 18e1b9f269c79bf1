// saturate launch: start data-parallel ranks with torchrun's environment (see dist/launch.h).
#include <unistd.h>

#include <iostream>
#include <mutex>

#include <fmt/format.h>

#include "commands.h"
#include "saturate/core/errors.h"
#include "saturate/dist/launch.h"

namespace saturate::cli {

void add_launch_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "launch", "Start data-parallel ranks (torchrun's environment): saturate launch --nproc-per-node N -- saturate train ...");
  auto o = std::make_shared<LaunchOptions>();
  add_option_flag(*cmd, "nproc_per_node", o->nproc_per_node);
  add_option_flag(*cmd, "nnodes", o->nnodes);
  add_option_flag(*cmd, "node_rank", o->node_rank);
  add_option_flag(*cmd, "master_addr", o->master_addr);
  add_option_flag(*cmd, "master_port", o->master_port);
  add_option_flag(*cmd, "kill_grace", o->kill_grace_s);
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

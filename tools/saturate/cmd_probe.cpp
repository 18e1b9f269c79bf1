// saturate probe: measure one configuration at one batch size (session/probe_session.h).
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "data_flags.h"
#include "dist_flags.h"
#include "memory_flags.h"
#include "monitor_flags.h"
#include "step_flags.h"
#include "saturate/session/probe_session.h"
#include "saturate/report/progress_lines.h"

namespace saturate::cli {
namespace {

struct ProbeCommand {
  WorkloadFlags flags;
  ProbeSessionOptions o;
  std::string timeline;
};

int run_probe(ProbeCommand& c) {
  c.o.timeline = !c.timeline.empty();
  c.o.check();
  const DistEnv env = prepare_dist(DistFlags{}, c.flags);  // one rank of several: its own GPU, rank 0 reports
  OpenedData opened;
  auto session = open_session(c.flags, &c.o.data, &opened);
  const auto ranks = open_dist(DistFlags{}, env, session->device);  // the ranks meet: their settings compared
  const ProbeSessionResult r = run_probe_session(*session, opened, c.o, data_progress_lines(print_line));
  for (const std::string& w : r.warnings) print_line("saturate: warning: " + w);
  if (r.timeline && env.rank == 0) write_memory_timeline(c.timeline, *r.timeline, *session, c.o.batch);
  if (c.flags.json != "-" && env.rank == 0) std::cout << with_flags(r.to_text(session->context));
  if (!c.flags.json.empty() && env.rank == 0) write_json(r.to_json(session->context), c.flags.json, std::cout);
  if (r.trial.status == TrialStatus::kError) {
    print_line(fmt::format("saturate: error: batch {}: {}", r.trial.batch, r.trial.error));
    return 1;
  }
  return 0;  // an OOM is a measured result
}

}  // namespace

void add_probe_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("probe", "Run warm-up and timed training steps at one batch size and measure them");
  auto c = std::make_shared<ProbeCommand>();
  add_workload_flags(*cmd, c->flags);
  add_memory_probe_flags(*cmd, c->o.empty_cache, c->timeline);
  add_monitor_flags(*cmd, c->o.monitor);
  add_data_flags(*cmd, c->o.data);
  add_option_flag(*cmd, "batch", c->o.batch)->required();
  add_option_flag(*cmd, "probe.warmup_steps", c->o.warmup_steps);
  add_option_flag(*cmd, "probe.measure_steps", c->o.measure_steps);
  add_step_flags(*cmd, c->o.step);
  cmd->callback([c, &action] { action = [c]() { return run_probe(*c); }; });
}

}  // namespace saturate::cli

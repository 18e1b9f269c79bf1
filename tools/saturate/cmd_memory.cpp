// saturate memory: where a training step's memory goes (breakdown, timeline) and whether a run
// of steps leaks.
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "dist_flags.h"
#include "step_flags.h"
#include "memory_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/timeline.h"
#include "saturate/probe/probe.h"
#include "saturate/session/memory_session.h"

namespace saturate::cli {
namespace {

struct MemoryCommandFlags {
  MemorySessionOptions o;  // the flags fill the library's options
  StepSettings step;
  std::string timeline;
  std::string html;
};

}  // namespace

void add_memory_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "memory", "Break one training step's memory down, plot its timeline, and check a run of steps for leaks");
  auto flags = std::make_shared<WorkloadFlags>();
  auto cf = std::make_shared<MemoryCommandFlags>();
  add_workload_flags(*cmd, *flags);
  add_memory_probe_flags(*cmd, cf->o.empty_cache, cf->timeline);
  add_step_flags(*cmd, cf->step);
  add_option_flag(*cmd, "batch", cf->o.batch)->required();
  add_option_flag(*cmd, "memory.warmup_steps", cf->o.warmup_steps);
  add_option_flag(*cmd, "leak_check_steps", cf->o.leak_check_steps);
  add_html_flag(*cmd, cf->html);
  add_option_flag(*cmd, "keep_loss", cf->o.keep_loss);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      MemorySessionOptions o = cf->o;
      o.step = cf->step.footprint();
      o.check();
      const DistEnv env = prepare_dist(DistFlags{}, *flags);  // one rank of several: its own GPU, rank 0 reports
      auto session = open_session(*flags);
      const auto ranks = open_dist(DistFlags{}, env, session->device);  // the ranks meet: their settings compared
      const MemorySessionResult r = run_memory_session(*session->workload, *session->meter, o);
      if (env.rank != 0) return r.trial.status == TrialStatus::kError ? 1 : 0;
      if (!cf->timeline.empty()) write_memory_timeline(cf->timeline, r.timeline, *session, o.batch);
      const nlohmann::json j = r.to_json(session->context);
      if (flags->json != "-") {
        std::cout << with_flags(r.to_text(session->context));
        if (!cf->timeline.empty()) std::cout << "timeline written to " << cf->timeline << "\n";
      }
      if (!flags->json.empty()) write_json(j, flags->json, std::cout);
      write_html_report(j, cf->html);
      if (r.trial.status == TrialStatus::kError) {
        std::cerr << fmt::format("saturate: error: batch {}: {}\n", r.trial.batch, with_flags(r.trial.error));
        return 1;
      }
      return 0;  // an OOM is a measured result, and so is a leak
    };
  });
}

}  // namespace saturate::cli

// saturate probe: measure one configuration at one batch size.
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "commands.h"
#include "flag_checks.h"
#include "memory_flags.h"
#include "monitor_flags.h"
#include "data_flags.h"
#include "step_flags.h"
#include "saturate/core/errors.h"
#include "saturate/probe/probe.h"
#include "saturate/session/progress_lines.h"
#include "saturate/report/monitor_text.h"

namespace saturate::cli {

void add_probe_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("probe", "Run warm-up and timed training steps at one batch size and measure them");
  auto flags = std::make_shared<WorkloadFlags>();
  auto batch = std::make_shared<int64_t>(0);
  auto warmup = std::make_shared<int>(1);
  auto steps = std::make_shared<int>(5);
  auto stepflags = std::make_shared<StepFlags>();
  add_workload_flags(*cmd, *flags);
  auto memflags = std::make_shared<MemoryFlags>();
  add_memory_probe_flags(*cmd, *memflags);
  auto mflags = std::make_shared<MonitorFlags>();
  add_monitor_flags(*cmd, *mflags);
  auto dflags = std::make_shared<DataOptions>();
  add_data_flags(*cmd, *dflags);
  add_option_flag(*cmd, "batch", *batch)->required();
  add_option_flag(*cmd, "probe.warmup_steps", *warmup);
  add_option_flag(*cmd, "probe.measure_steps", *steps);
  add_step_flags(*cmd, *stepflags);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      const TrainingFootprint footprint = step_footprint(*stepflags);
      OpenedData opened;
      auto session = open_session(*flags, dflags.get(), &opened);
      Probe probe(*session->workload, *session->meter);
      probe.set_footprint(footprint);
      auto memory = attach_memory(*memflags, probe, *session);  // memory_breakdown in the JSON
      auto monitor = attach_monitor(*mflags, probe, session->device);
      auto data = attach_data(opened, *dflags, probe, *session, *batch, data_progress_lines(print_line));  // --data: the loader feeds it
      const Trial t = probe.run(*batch, {*warmup, *steps, 0});
      write_memory_timeline(*memflags, *memory, *session);
      if (monitor) monitor->finish();
      if (data) data->rethrow_error();  // bad data: exit 2 naming the file
      if (flags->json == "-") {
        nlohmann::json j = trial_json(t);
        j.update(context_json(session->context));
        write_json(j, "-", std::cout);
      } else {
        std::ostringstream trial;  // a library error the trial met names options: said as flags
        print_trial(trial, session->context, t);
        std::cout << with_flags(trial.str());
        std::cout << bottleneck_text(t);
        if (data && t.findings.data) std::cout << with_flags(data_text(data->source(), *t.findings.data));
        if (!flags->json.empty()) {
          nlohmann::json j = trial_json(t);
          j.update(context_json(session->context));
          write_json(j, flags->json, std::cout);
        }
      }
      if (t.status == TrialStatus::kError) {
        std::cerr << fmt::format("saturate: error: batch {}: {}\n", t.batch, t.error);
        return 1;
      }
      return 0;  // an OOM is a measured result
    };
  });
}

}  // namespace saturate::cli

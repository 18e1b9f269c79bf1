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
  auto dflags = std::make_shared<DataFlags>();
  add_data_flags(*cmd, *dflags);
  cmd->add_option("--batch,-b", *batch, "batch size (samples per step)")->check(in_range(1, 2147483647.0, "samples per step"))->required();
  cmd->add_option("--warmup-steps,--warmup", *warmup, "untimed training steps first")->check(in_range(0, 1e6, "steps"))->capture_default_str();
  cmd->add_option("--timed-steps,--steps", *steps, "timed training steps (the median is reported)")->check(in_range(1, 1e6, "steps"))->capture_default_str();
  add_step_flags(*cmd, *stepflags);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      if (*batch <= 0)
        throw UsageError(fmt::format("--batch: {} is not a positive integer; give the number of samples per step", *batch));
      if (*warmup < 0 || *steps < 1)
        throw UsageError(fmt::format("--warmup-steps {} / --timed-steps {}: need warm-up >= 0 and at least one timed step", *warmup,
                                     *steps));
      const TrainingFootprint footprint = step_footprint(*stepflags);
      auto session = open_session(with_data_shape(*dflags, *flags));
      Probe probe(*session->workload, *session->meter);
      probe.set_footprint(footprint);
      auto memory = attach_memory(*memflags, probe, *session);  // memory_breakdown in the JSON
      auto monitor = attach_monitor(*mflags, probe, session->device);
      auto data = attach_data(*dflags, probe, *session, *batch, /*quiet=*/false);  // --data: the loader feeds it
      const Trial t = probe.run(*batch, {*warmup, *steps, 0});
      write_memory_timeline(*memflags, *memory, *session);
      if (monitor) monitor->finish();
      rethrow_data_error(data.get());  // bad data: exit 2 naming the file
      if (flags->json == "-") {
        nlohmann::json j = trial_json(t);
        j.update(context_json(session->context));
        write_json(j, "-", std::cout);
      } else {
        std::ostringstream trial;  // a library error the trial met names options: said as flags
        print_trial(trial, session->context, t);
        std::cout << with_flags(trial.str());
        std::cout << bottleneck_text(t);
        if (data && t.findings.data) std::cout << with_flags(data_text(data_source(*data), *t.findings.data));
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

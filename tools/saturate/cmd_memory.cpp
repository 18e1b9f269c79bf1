// saturate memory: where a training step's memory goes (breakdown, timeline) and whether a run
// of steps leaks.
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "html_flag.h"
#include "flag_checks.h"
#include "step_flags.h"
#include "memory_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/timeline.h"
#include "saturate/probe/probe.h"
#include "saturate/report/memory_text.h"

namespace saturate::cli {
namespace {

struct MemoryCommandFlags {
  int64_t batch = 0;
  int warmup = 1;
  int steps = 0;
  bool keep_loss = false;
  std::string html;
};

}  // namespace

void add_memory_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "memory", "Break one training step's memory down, plot its timeline, and check a run of steps for leaks");
  auto flags = std::make_shared<WorkloadFlags>();
  auto mf = std::make_shared<MemoryFlags>();
  auto cf = std::make_shared<MemoryCommandFlags>();
  add_workload_flags(*cmd, *flags);
  add_memory_probe_flags(*cmd, *mf);
  auto stepflags = std::make_shared<StepFlags>();
  add_step_flags(*cmd, *stepflags);
  cmd->add_option("--batch,-b", cf->batch, "batch size (samples per step)")->check(in_range(1, 2147483647.0, "samples per step"))->required();
  cmd->add_option("--warmup-steps,--warmup", cf->warmup, "steps before the recorded one (the first makes the optimizer state)")->check(in_range(0, 1e6, "steps"))
      ->capture_default_str();
  cmd->add_option("--leak-check-steps,--steps", cf->steps, "also run this many training steps and check that memory stays flat (0: no leak check)")->check(in_range(0, 1e9, "0: no leak check"))
      ->capture_default_str();
  add_html_flag(*cmd, cf->html);
  cmd->add_flag("--keep-loss", cf->keep_loss,
                "in the leak check, keep every step's loss and its graph alive (a deliberate leak, to see the "
                "detector work)");
  cmd->callback([=, &action] {
    action = [=]() -> int {
      check_html_path(cf->html);
      if (cf->batch <= 0)
        throw UsageError(fmt::format("--batch: {} is not a positive integer; give the number of samples per step", cf->batch));
      if (cf->warmup < 0) throw UsageError(fmt::format("--warmup-steps: {} is negative", cf->warmup));
      if (cf->steps < 0) throw UsageError(fmt::format("--leak-check-steps: {} is negative; give 0 for no leak check", cf->steps));
      if (cf->keep_loss && cf->steps == 0)
        throw UsageError("--keep-loss: needs --leak-check-steps N (the leak check it feeds), e.g. --leak-check-steps 20");
      const TrainingFootprint footprint = step_footprint(*stepflags);
      auto session = open_session(*flags);
      Probe probe(*session->workload, *session->meter);
      probe.set_footprint(footprint);
      auto observer = attach_memory(*mf, probe, *session);
      const Trial t = probe.run(cf->batch, {cf->warmup, 1, 0});
      write_memory_timeline(*mf, *observer, *session);
      const Timeline timeline = build_timeline(observer->last_log());
      std::optional<LeakCheckResult> leak;
      if (cf->steps > 0) {
        LeakCheckOptions lo;
        lo.batch = cf->batch;
        lo.steps = cf->steps;
        lo.keep_loss_graph = cf->keep_loss;
        lo.step.precision = footprint.precision;
        lo.step.checkpointing = footprint.checkpointing;
        leak = run_leak_check(*session->workload, *session->meter, lo);
      }
      nlohmann::json j = trial_json(t);
      j.update(context_json(session->context));
      nlohmann::json tj = timeline_json(timeline);
      tj.erase("points");  // the points go to --timeline FILE.json
      j["timeline"] = tj;
      if (leak) {
        j["leak"] = to_json(*leak);
        j["leak"]["keep_loss"] = cf->keep_loss;
      }
      if (flags->json != "-") {
        print_trial(std::cout, session->context, t);
        std::cout << breakdown_table(observer->last_breakdown()) << timeline_summary(timeline);
        if (t.findings.cache_return)
          std::cout << fmt::format("cache      emptied {} time(s), {:.2f} ms\n", t.findings.cache_return->calls,
                                   t.findings.cache_return->ms);
        if (leak) std::cout << leak_text(*leak, cf->steps);
        if (!mf->timeline.empty()) std::cout << "timeline written to " << mf->timeline << "\n";
      }
      if (!flags->json.empty()) write_json(j, flags->json, std::cout);
      write_html_report(j, cf->html);
      if (t.status == TrialStatus::kError) {
        std::cerr << fmt::format("saturate: error: batch {}: {}\n", t.batch, t.error);
        return 1;
      }
      return 0;  // an OOM is a measured result, and so is a leak
    };
  });
}

}  // namespace saturate::cli

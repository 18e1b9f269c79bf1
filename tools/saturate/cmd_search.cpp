// saturate search: find the largest, the recommended and the saturating batch size.
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "memory_flags.h"
#include "monitor_flags.h"
#include "data_flags.h"
#include "dist_flags.h"
#include "step_flags.h"
#include "objective_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/stop_signals.h"
#include "saturate/core/units.h"
#include "saturate/report/progress_lines.h"
#include "saturate/session/search_session.h"
#include "saturate/report/printer.h"

namespace saturate::cli {
namespace {

struct SearchCommand {
  WorkloadFlags flags;
  WorkloadSearchOptions wo;  // the flags fill the library's options
  std::string strategy = "fit";
  bool quiet = false;
  std::string format = "console";
  std::string html;
  PlanForOptions plan;
  MonitorSettings monitor;
  DataOptions data;
  DistFlags dist;
  StepSettings step;
  ObjectiveFlags objective;
};

void add_search_flags(CLI::App& cmd, SearchCommand& c) {
  SearchOptions& o = c.wo.search;
  add_option_flag(cmd, "strategy", c.strategy);
  add_option_flag(cmd, "target_fraction", o.target_fraction);
  add_option_flag(cmd, "max_batch", o.max_batch);
  add_option_flag(cmd, "start_batch", o.start_batch);
  add_option_flag(cmd, "search.warmup_steps", o.warmup_steps);
  add_option_flag(cmd, "measure_steps", o.measure_steps);
  add_option_flag(cmd, "required_batch", c.wo.required_batch);
  add_option_flag(cmd, "confirm_runs", o.confirm_runs);
}

void add_output_flags(CLI::App& cmd, SearchCommand& c) {
  add_option_flag(cmd, "quiet", c.quiet);
  add_option_flag(cmd, "format", c.format);
  add_html_flag(cmd, c.html);
}

/// The search's options from the flags, checked (usage errors before any device work).
WorkloadSearchOptions search_options(const SearchCommand& c, int world_size) {
  WorkloadSearchOptions wo = c.wo;
  wo.search.strategy = parse_strategy(c.strategy);
  wo.objective = objective_options(c.objective);
  c.step.apply_to(wo);
  wo.exact_ranks = c.dist.rank_max_exact;
  wo.check(world_size);
  return wo;
}

/// What the search reports as it goes, on stderr (rank 0; less with -q).
SearchSessionEvents search_events(const SearchCommand& c, bool talk, bool rank0, const std::string& source) {
  SearchSessionEvents e;
  e.progress = search_progress_lines(print_line, source, talk, !c.quiet && rank0);
  if (!c.quiet) e.data = data_progress_lines(print_line);
  e.on_warning = [](const std::string& w) { print_line("saturate: warning: " + w); };
  return e;
}

int run_search(SearchCommand& c) {
  const StopSignals stop_signals({"stopping the search at the current trial's next step"});  // exit 128 + N
  const DistEnv denv = prepare_dist(c.dist, c.flags);  // one rank of several: rank 0 reports
  SearchSessionOptions so{search_options(c, denv.world_size), c.plan, c.data, std::nullopt};
  const OutputFormat format = search_output_format(c.format, c.flags.json);
  so.plan.check();
  const bool talk = !c.quiet && denv.rank == 0;
  std::unique_ptr<Printer> printer = make_printer(format, std::cout, talk ? &std::cerr : nullptr, find_flag_for_option);
  if (denv.rank == 0) so.search.search.on_trial = [&printer](const Trial& t) { printer->trial(t); };
  OpenedData opened;
  auto session = open_session(c.flags, &c.data, &opened);
  session->context.command = "search";
  session->context.world_size = denv.world_size;
  if (c.plan.plan_only) return run_plan_only(c.plan, *session, c.wo.search.target_fraction, c.flags.json);
  if (talk)
    print_line(fmt::format("saturate: searching {} on {} within {} ({})", session->context.model_name,
                           session->context.device_info, format_bytes(session->context.budget_bytes),
                           to_string(so.search.search.strategy)));
  if (denv.rank == 0) printer->begin(session->context);
  so.search.try_fast_paths = c.step.tries_fast_paths(session->device.is_cuda());
  so.monitor = c.monitor.on(session->device);
  auto dist = open_dist(c.dist, denv, session->device);  // nullptr for one process
  const SearchSessionResult r = run_search_session(*session, opened, so, dist.get(),
                                                   search_events(c, talk, denv.rank == 0, trial_data_name(opened)));
  if (denv.rank != 0) return r.failure.empty() ? 0 : 1;
  const nlohmann::json j = r.to_json(session->context);
  printer->result(SearchReport{r.found.search(), j, r.found.decision(), with_flags(r.notes), r.found.effort()});
  printer->end();
  if (!c.flags.json.empty() && c.flags.json != "-") write_json(j, c.flags.json, std::cout);
  write_html_report(j, c.html);
  if (!r.failure.empty()) print_line("saturate: error: " + r.failure);
  return r.failure.empty() ? 0 : 1;
}

}  // namespace

void add_search_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("search", "Find the largest batch that fits, the recommended one and the saturating one");
  auto c = std::make_shared<SearchCommand>();
  add_workload_flags(*cmd, c->flags);
  add_plan_flags(*cmd, c->plan);
  add_monitor_flags(*cmd, c->monitor);
  add_data_flags(*cmd, c->data);
  add_dist_flags(*cmd, c->dist, /*search=*/true);
  add_step_flags(*cmd, c->step, /*search=*/true);
  add_search_flags(*cmd, *c);
  add_objective_flags(*cmd, c->objective, /*base_batch_flag=*/true);
  add_output_flags(*cmd, *c);
  cmd->callback([c, &action] { action = [c]() { return run_search(*c); }; });
}

}  // namespace saturate::cli

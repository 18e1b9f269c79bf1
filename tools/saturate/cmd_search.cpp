// saturate search: find the largest, the recommended and the saturating batch size.
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "memory_flags.h"
#include "flag_checks.h"
#include "monitor_flags.h"
#include "data_flags.h"
#include "html_flag.h"
#include "dist_flags.h"
#include "step_flags.h"
#include "objective_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/session/progress_lines.h"
#include "saturate/session/search_session.h"
#include "saturate/report/printer.h"

namespace saturate::cli {
namespace {

struct SearchFlags {
  std::string strategy = "fit";
  int confirm_runs = 0;
  double target_memory = 0.9;
  int64_t max_batch = 0;
  int64_t start_batch = 2;
  int steps = 2;
  bool quiet = false;
  int64_t required_batch = 0;
  std::string format = "console";
  std::string html;
};

struct SearchCommand {
  WorkloadFlags flags;
  SearchFlags sf;
  PlanForOptions plan;
  MonitorSettings monitor;
  DataOptions data;
  DistFlags dist;
  StepSettings step;
  ObjectiveFlags objective;
};

void add_search_flags(CLI::App& cmd, SearchFlags& sf) {
  add_option_flag(cmd, "strategy", sf.strategy);
  add_option_flag(cmd, "target_fraction", sf.target_memory);
  add_option_flag(cmd, "max_batch", sf.max_batch);
  add_option_flag(cmd, "start_batch", sf.start_batch);
  add_option_flag(cmd, "measure_steps", sf.steps);
  add_option_flag(cmd, "required_batch", sf.required_batch);
  add_option_flag(cmd, "confirm_runs", sf.confirm_runs);
}

void add_output_flags(CLI::App& cmd, SearchFlags& sf) {
  add_option_flag(cmd, "quiet", sf.quiet);
  add_option_flag(cmd, "format", sf.format);
  add_html_flag(cmd, sf.html);
}

/// The search's options from the flags, checked (usage errors before any device work).
WorkloadSearchOptions search_options(const SearchCommand& c, int world_size) {
  WorkloadSearchOptions wo;
  SearchOptions& opt = wo.search;
  opt.strategy = parse_strategy(c.sf.strategy);
  opt.target_fraction = c.sf.target_memory;
  opt.max_batch = c.sf.max_batch;
  opt.confirm_runs = c.sf.confirm_runs;
  opt.start_batch = c.sf.start_batch;
  opt.measure_steps = c.sf.steps;
  wo.objective = objective_options(c.objective);
  wo.footprint = c.step.footprint();
  wo.compare_checkpointing = c.step.compares_checkpointing();
  wo.required_batch = c.sf.required_batch;
  wo.exact_ranks = c.dist.rank_max_exact;
  wo.checkpointing_policy = c.step.checkpointing;
  wo.fast_paths_policy = c.step.fast_paths;
  if (c.step.fast_paths == "auto")
    wo.fast_paths_not_tried = "auto tries them on CUDA; --fast-paths try measures them on this CPU";
  wo.check(world_size);
  return wo;
}

/// --format, with --json - meaning JSON on stdout.
OutputFormat output_format(const SearchCommand& c) {
  OutputFormat format = parse_output_format(c.sf.format);
  if (c.flags.json != "-") return format;
  if (format != OutputFormat::kConsole && format != OutputFormat::kJson)
    throw UsageError(fmt::format("--json - writes JSON to stdout, and so would --format {}; give --json FILE to keep "
                                 "both, or drop one",
                                 c.sf.format));
  return OutputFormat::kJson;
}

/// What the search reports as it goes, on stderr (rank 0; less with -q).
SearchSessionEvents search_events(const SearchCommand& c, bool talk, bool rank0, const std::string& source) {
  SearchSessionEvents e;
  e.progress = search_progress_lines(print_line, source, talk, !c.sf.quiet && rank0);
  if (!c.sf.quiet) e.data = data_progress_lines(print_line);
  e.on_warning = [](const std::string& w) { print_line("saturate: warning: " + w); };
  return e;
}

int run_search(SearchCommand& c) {
  const DistEnv denv = prepare_dist(c.dist, c.flags);  // one rank of several: rank 0 reports
  SearchSessionOptions so{search_options(c, denv.world_size), c.plan, c.data, std::nullopt};
  const OutputFormat format = output_format(c);
  check_html_path(c.sf.html);
  so.plan.check();
  const bool talk = !c.sf.quiet && denv.rank == 0;
  std::unique_ptr<Printer> printer = make_printer(format, std::cout, talk ? &std::cerr : nullptr, find_flag_for_option);
  if (denv.rank == 0) so.search.search.on_trial = [&printer](const Trial& t) { printer->trial(t); };
  OpenedData opened;
  auto session = open_session(c.flags, &c.data, &opened);
  session->context.command = "search";
  session->context.world_size = denv.world_size;
  if (c.plan.plan_only) return run_plan_only(c.plan, *session, c.sf.target_memory, c.flags.json);
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
  printer->result(SearchReport{r.found.search(), r.json, with_flags(r.notes)});
  printer->end();
  if (!c.flags.json.empty() && c.flags.json != "-") write_json(r.json, c.flags.json, std::cout);
  write_html_report(r.json, c.sf.html);
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
  add_search_flags(*cmd, c->sf);
  add_objective_flags(*cmd, c->objective, /*base_batch_flag=*/true);
  add_output_flags(*cmd, c->sf);
  cmd->callback([c, &action] { action = [c]() { return run_search(*c); }; });
}

}  // namespace saturate::cli

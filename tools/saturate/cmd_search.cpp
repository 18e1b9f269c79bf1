// saturate search: find the largest, the recommended and the saturating batch size.
#include <algorithm>
#include <iostream>

#include <ATen/Parallel.h>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "flag_checks.h"
#include "memory_flags.h"
#include "monitor_flags.h"
#include "data_flags.h"
#include "html_flag.h"
#include "dist_flags.h"
#include "step_flags.h"
#include "objective_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/dist/search_run.h"
#include "saturate/models/flops.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/session/progress_lines.h"
#include "saturate/session/workload_search.h"
#include "saturate/report/checkpointing_report.h"
#include "saturate/report/printer.h"
#include "saturate/report/memory_text.h"
#include "saturate/report/search_text.h"

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

/// Batch 1 did not fit: measure what it needs without the budget, so the message can say it.
std::string batch_one_need(Session& s, const TrainingFootprint& footprint) {
  const int64_t budget = s.meter->budget_bytes();
  s.meter->set_budget_bytes(s.meter->capacity_bytes());
  Probe probe(*s.workload, *s.meter);
  probe.set_footprint(footprint);
  const Trial t = probe.run(1, {1, 1, 0});
  s.meter->set_budget_bytes(budget);
  if (!t.ok()) return fmt::format("more than the device's {}", format_bytes(s.meter->capacity_bytes()));
  return format_bytes(t.peak_reserved_bytes);
}

struct SearchCommand {
  WorkloadFlags flags;
  SearchFlags sf;
  MemoryFlags memory;
  MonitorFlags monitor;
  DataOptions data;
  DistFlags dist;
  StepFlags step;
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
  wo.footprint = step_footprint(c.step);
  wo.compare_checkpointing = c.step.checkpointing == "auto";
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

/// 1 for a search without an answer (an error, batch 1 too large, no batch within the target).
int search_exit_status(const SearchResult& result, Session& session, Probe& probe, double target) {
  if (!result.error.empty()) {
    std::cerr << "saturate: error: " << with_flags(result.error) << "\n";
    return 1;
  }
  if (result.max_batch == 0) {
    std::cerr << fmt::format("saturate: error: batch 1 does not fit in --memory-budget {}: {} needs {} at batch 1; "
                             "raise the budget, or use a smaller model or input\n",
                             format_bytes(session.context.budget_bytes), session.context.model_name,
                             batch_one_need(session, probe.footprint()));
    return 1;
  }
  if (result.recommended_batch == 0) {  // batches fit, none within the target: say so, fail
    std::cerr << fmt::format("saturate: error: no batch keeps its measured peak within --target-memory {:g} of the "
                             "budget ({}); batches up to {} fit the whole budget: raise --target-memory (e.g. 0.9) or "
                             "--memory-budget\n",
                             target, format_bytes(static_cast<int64_t>(target * session.context.budget_bytes)),
                             result.max_batch);
    return 1;
  }
  return 0;
}

int run_search(SearchCommand& c) {
  const DistEnv denv = prepare_dist(c.dist, c.flags);  // one rank of several: rank 0 reports
  WorkloadSearchOptions wo = search_options(c, denv.world_size);
  const OutputFormat format = output_format(c);
  check_html_path(c.sf.html);
  const bool talk = !c.sf.quiet && denv.rank == 0;
  std::unique_ptr<Printer> printer = make_printer(format, std::cout, talk ? &std::cerr : nullptr, find_flag_for_option);
  if (denv.rank == 0) wo.search.on_trial = [&printer](const Trial& t) { printer->trial(t); };
  check_memory_plan_flags(c.memory);
  OpenedData opened;
  auto session = open_session(c.flags, &c.data, &opened);
  session->context.command = "search";
  session->context.world_size = denv.world_size;
  if (c.memory.plan_only) return run_plan_only(c.memory, *session, c.sf.target_memory, c.flags.json);
  if (talk)
    std::cerr << fmt::format("saturate: searching {} on {} within {} ({})\n", session->context.model_name,
                             session->context.device_info, format_bytes(session->context.budget_bytes),
                             to_string(wo.search.strategy));
  if (denv.rank == 0) printer->begin(session->context);
  Probe probe(*session->workload, *session->meter);
  wo.try_fast_paths = fast_paths_tried(c.step, session->device.is_cuda());
  WorkloadSearch search(probe, *session->meter, wo, denv.world_size);  // the GEMM rate, the FLOP counter
  auto memory = attach_memory(c.memory, probe, *session);               // memory_breakdown per trial
  probe.set_empty_cache_before_trials(true);  // trials compare reserved peaks: each starts from an empty cache
  // --data: the loader feeds every trial; --workers auto is tuned once, at batch 32 (or the cap)
  auto data = attach_data(opened, c.data, probe, *session, c.sf.max_batch > 0 ? std::min<int64_t>(32, c.sf.max_batch) : 32,
                          c.sf.quiet ? DataEvents{} : data_progress_lines(print_line));
  auto monitor = attach_monitor(c.monitor, probe, session->device);
  auto dist = open_dist(c.dist, denv, session->device);  // nullptr for one process
  DataFeed* feed = data ? data->feed.get() : nullptr;
  const std::string source =
      feed ? feed->dataset().name() : std::string("synthetic batches (random labels; give --data for yours)");
  Workload& w = *session->workload;
  const WorkloadSearchResult found = search.run(
      dist.get(), [&](int64_t b) { return feed ? feed->next(b) : w.synthetic_batch(b); }, source,
      search_progress_lines(print_line, source, talk, !c.sf.quiet));
  const SearchResult& result = found.search();
  if (dist) session->context.budget_bytes = result.budget_bytes;  // the smallest rank's
  if (monitor) monitor->finish();
  if (data) data->rethrow_error();  // bad data: exit 2 naming the file
  nlohmann::json j = found.to_json(session->context);
  const auto plan = run_memory_plan(c.memory, *session, c.sf.target_memory);
  add_memory_json(j, result, plan);
  if (denv.rank != 0) return result.error.empty() && result.max_batch > 0 ? 0 : 1;
  std::string notes = found.notes(j);  // after the answer, for people (console and markdown)
  if (plan) notes += plan_text(*plan);
  if (data) notes += data_search_text(data->source(), result);
  printer->result(SearchReport{result, j, with_flags(notes)});
  printer->end();
  if (!c.flags.json.empty() && c.flags.json != "-") write_json(j, c.flags.json, std::cout);
  write_html_report(j, c.sf.html);
  return search_exit_status(result, *session, probe, c.sf.target_memory);
}

}  // namespace

void add_search_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("search", "Find the largest batch that fits, the recommended one and the saturating one");
  auto c = std::make_shared<SearchCommand>();
  add_workload_flags(*cmd, c->flags);
  add_memory_plan_flags(*cmd, c->memory);
  add_monitor_flags(*cmd, c->monitor);
  add_data_flags(*cmd, c->data);
  add_dist_flags(*cmd, c->dist, /*search=*/true);
  add_step_flags(*cmd, c->step, /*allow_auto=*/true);
  add_search_flags(*cmd, c->sf);
  add_objective_flags(*cmd, c->objective, /*base_batch_flag=*/true);
  add_output_flags(*cmd, c->sf);
  cmd->callback([c, &action] { action = [c]() { return run_search(*c); }; });
}

}  // namespace saturate::cli

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

void print_fast_path_trials(const FastPathChoice& choice) {
  for (const auto& t : choice.tried)
    std::cerr << fmt::format("saturate: fast path {:<16} {:>8.2f} ms -> {:>8.2f} ms  {:+6.1f} %  {}\n", t.name,
                             t.baseline_ms, t.with_ms, 100 * t.gain, t.kept ? "kept" : "not kept: " + t.note);
}

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

}  // namespace

void add_search_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("search", "Find the largest batch that fits, the recommended one and the saturating one");
  auto flags = std::make_shared<WorkloadFlags>();
  auto sf = std::make_shared<SearchFlags>();
  add_workload_flags(*cmd, *flags);
  auto memflags = std::make_shared<MemoryFlags>();
  add_memory_plan_flags(*cmd, *memflags);
  auto mflags = std::make_shared<MonitorFlags>();
  add_monitor_flags(*cmd, *mflags);
  auto dflags = std::make_shared<DataFlags>();
  add_data_flags(*cmd, *dflags);
  auto distflags = std::make_shared<DistFlags>();
  add_dist_flags(*cmd, *distflags, /*search=*/true);
  auto stepflags = std::make_shared<StepFlags>();
  add_step_flags(*cmd, *stepflags, /*allow_auto=*/true);
  cmd->add_option("--strategy", sf->strategy, "fit (few trials, exact) | binsearch | power (Lightning's)")
      ->capture_default_str();
  cmd->add_option("--target-memory", sf->target_memory,
                  "fraction of the budget the recommended batch's measured peak may use (seed B2: 0.8-0.9)")->check(in_range(0.01, 1, "a fraction of the budget, e.g. 0.9"))
      ->capture_default_str();
  cmd->add_option("--max-batch", sf->max_batch, "never try a batch above this (0: no cap)")->check(in_range(0, 2147483647.0, "0: no cap"))->capture_default_str();
  cmd->add_option("--start-batch", sf->start_batch, "first batch of power/binsearch")->check(in_range(1, 2147483647.0, "a batch"))->capture_default_str();
  cmd->add_option("--timed-steps,--steps", sf->steps, "timed training steps per trial, after one warm-up step")->check(in_range(1, 1e6, "steps per trial"))->capture_default_str();
  cmd->add_option("--required-batch", sf->required_batch,
                  "with --checkpointing auto: the micro-batch you need; checkpointing is chosen when only it fits it")->check(in_range(1, 2147483647.0, "a micro-batch"));
  cmd->add_option("--confirm", sf->confirm_runs,
                  "re-probe the found boundary (max and max+1) this many more times; where memory varies from run to "
                  "run, max_batch becomes the largest batch that fit every time and the spread is reported")->check(in_range(0, 10, "re-probes"))
      ->capture_default_str();
  auto objflags = std::make_shared<ObjectiveFlags>();
  add_objective_flags(*cmd, *objflags, /*base_batch_flag=*/true);
  cmd->add_flag("--quiet,-q", sf->quiet, "no progress lines on stderr");
  cmd->add_option("--format", sf->format,
                  "stdout: console (table) | json | jsonl (a line per trial as it finishes) | csv | markdown")
      ->capture_default_str();
  add_html_flag(*cmd, sf->html);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      SearchOptions opt;
      opt.strategy = parse_strategy(sf->strategy);
      opt.target_fraction = sf->target_memory;
      opt.max_batch = sf->max_batch;
      opt.confirm_runs = sf->confirm_runs;
      opt.start_batch = sf->start_batch;
      opt.measure_steps = sf->steps;
      opt.check();  // usage errors before any device work
      const bool auto_checkpointing = stepflags->checkpointing == "auto";
      const TrainingFootprint footprint = step_footprint(*stepflags);
      if (sf->required_batch < 0 || (sf->required_batch > 0 && !auto_checkpointing))
        throw UsageError(fmt::format("--required-batch {}: give a positive batch, together with --checkpointing auto",
                                     sf->required_batch));
      const ObjectiveOptions objective_opts = objective_options(*objflags);
      const Objective objective = objective_opts.objective;
      const DistEnv denv = prepare_dist(*distflags, *flags);  // one rank of several: rank 0 reports
      if (objective != Objective::kMemory && denv.world_size > 1)
        throw UsageError(fmt::format("--objective {}: the throughput curve is timed in one process; search with one "
                                     "rank (the batch per GPU), then launch",
                                     objflags->objective));
      OutputFormat format = parse_output_format(sf->format);
      if (flags->json == "-") {  // --json - is JSON on stdout, as --format json
        if (format != OutputFormat::kConsole && format != OutputFormat::kJson)
          throw UsageError(fmt::format("--json - writes JSON to stdout, and so would --format {}; give --json FILE "
                                       "to keep both, or drop one",
                                       sf->format));
        format = OutputFormat::kJson;
      }
      check_html_path(sf->html);
      std::unique_ptr<Printer> printer =
          make_printer(format, std::cout, !sf->quiet && denv.rank == 0 ? &std::cerr : nullptr, find_flag_for_option);
      if (denv.rank == 0) opt.on_trial = [&printer](const Trial& t) { printer->trial(t); };
      check_memory_plan_flags(*memflags);
      auto session = open_session(with_data_shape(*dflags, *flags));
      session->context.command = "search";
      session->context.world_size = denv.world_size;
      if (memflags->plan_only) return run_plan_only(*memflags, *session, sf->target_memory, flags->json);
      if (!sf->quiet && denv.rank == 0)
        std::cerr << fmt::format("saturate: searching {} on {} within {} ({})\n", session->context.model_name,
                                 session->context.device_info, format_bytes(session->context.budget_bytes),
                                 to_string(opt.strategy));
      if (denv.rank == 0) printer->begin(session->context);
      Probe probe(*session->workload, *session->meter);
      WorkloadSearchOptions wo;
      wo.search = opt;
      wo.objective = objective_opts;
      wo.footprint = footprint;
      wo.compare_checkpointing = auto_checkpointing;
      wo.required_batch = sf->required_batch;
      wo.exact_ranks = distflags->rank_max_exact;
      wo.try_fast_paths = fast_paths_tried(*stepflags, session->device.is_cuda());
      wo.checkpointing_policy = stepflags->checkpointing;
      wo.fast_paths_policy = stepflags->fast_paths;
      if (stepflags->fast_paths == "auto")
        wo.fast_paths_not_tried = "auto tries them on CUDA; --fast-paths try measures them on this CPU";
      WorkloadSearch search(probe, *session->meter, wo, denv.world_size);  // the GEMM rate, the FLOP counter
      auto memory = attach_memory(*memflags, probe, *session);  // memory_breakdown per trial
      probe.set_empty_cache_before_trials(true);  // trials compare reserved peaks: each starts from an empty cache
      // --data: the loader feeds every trial; --workers auto is tuned once, at batch 32 (or the cap)
      auto data = attach_data(*dflags, probe, *session, sf->max_batch > 0 ? std::min<int64_t>(32, sf->max_batch) : 32,
                              sf->quiet);
      auto monitor = attach_monitor(*mflags, probe, session->device);
      auto dist = open_dist(*distflags, denv, session->device);  // nullptr for one process
      const bool talk = !sf->quiet && denv.rank == 0;
      WorkloadSearchProgress progress;
      DataFeed* feed = data ? data->feed.get() : nullptr;
      const std::string source =
          feed ? feed->dataset().name() : std::string("synthetic batches (random labels; give --data for yours)");
      if (talk) {
        progress.on_pass = [](const std::string& pass) { std::cerr << "saturate: --checkpointing auto: " << pass << "\n"; };
        progress.objective = objective_progress_lines(source);
      }
      if (!sf->quiet) progress.on_fast_paths = print_fast_path_trials;
      Workload& w = *session->workload;
      const WorkloadSearchResult found =
          search.run(dist.get(), [&](int64_t b) { return feed ? feed->next(b) : w.synthetic_batch(b); }, source, progress);
      const SearchResult& result = found.search();
      if (dist) session->context.budget_bytes = result.budget_bytes;  // the smallest rank's
      if (monitor) monitor->finish();
      rethrow_data_error(data.get());  // bad data: exit 2 naming the file
      nlohmann::json j = found.to_json(session->context);
      const auto plan = run_memory_plan(*memflags, *session, sf->target_memory);
      add_memory_json(j, result, plan);
      if (denv.rank != 0) return result.error.empty() && result.max_batch > 0 ? 0 : 1;
      std::string notes = found.notes(j);  // after the answer, for people (console and markdown)
      if (plan) notes += plan_text(*plan);
      if (data) notes += data_search_text(data_source(*data), result);
      printer->result(SearchReport{result, j, with_flags(notes)});
      printer->end();
      if (!flags->json.empty() && flags->json != "-") write_json(j, flags->json, std::cout);
      write_html_report(j, sf->html);
      if (!result.error.empty()) {
        std::cerr << "saturate: error: " << with_flags(result.error) << "\n";
        return 1;
      }
      if (result.max_batch == 0) {
        std::cerr << fmt::format(
            "saturate: error: batch 1 does not fit in --memory-budget {}: {} needs {} at batch 1; raise the budget, "
            "or use a smaller model or input\n",
            format_bytes(session->context.budget_bytes), session->context.model_name, batch_one_need(*session, probe.footprint()));
        return 1;
      }
      if (result.recommended_batch == 0) {  // batches fit, none within the target: say so, fail
        std::cerr << fmt::format(
            "saturate: error: no batch keeps its measured peak within --target-memory {:g} of the budget ({}); batches up "
            "to {} fit the whole budget: raise --target-memory (e.g. 0.9) or --memory-budget\n",
            sf->target_memory, format_bytes(static_cast<int64_t>(sf->target_memory * session->context.budget_bytes)),
            result.max_batch);
        return 1;
      }
      return 0;
    };
  });
}

}  // namespace saturate::cli

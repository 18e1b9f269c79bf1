#include "memory_flags.h"
#include "option_flags.h"

#include <iostream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/memory/plan_runner.h"
#include "saturate/memory/timeline.h"
#include "saturate/report/memory_text.h"
#include "saturate/session/workload_search.h"

namespace saturate::cli {

void add_memory_probe_flags(CLI::App& app, MemoryFlags& f) {
  add_option_flag(app, "empty_cache", f.empty_cache);
  add_option_flag(app, "timeline", f.timeline);
}

void add_memory_plan_flags(CLI::App& app, MemoryFlags& f) {
  add_option_flag(app, "plan_for", f.plan_for);
  add_option_flag(app, "plan_batches", f.plan_batches);
  add_option_flag(app, "plan_allocator", f.plan_allocator);
  add_option_flag(app, "plan_only", f.plan_only);
}

std::unique_ptr<MemoryObserver> attach_memory(const MemoryFlags& f, Probe& probe, Session& s) {
  if (!f.timeline.empty()) check_output_path(f.timeline, {"--timeline", "step.svg"});  // before the work
  probe.set_empty_cache_before_trials(f.empty_cache);
  auto observer = std::make_unique<MemoryObserver>(*s.workload);
  probe.add_observer(observer.get());
  return observer;
}

void write_memory_timeline(const MemoryFlags& f, const MemoryObserver& observer, const Session& s) {
  if (f.timeline.empty()) return;
  const Timeline t = build_timeline(observer.last_log());
  write_timeline(t, f.timeline,
                 fmt::format("{} batch {} on {}: allocated memory in step {}", s.context.model_name,
                             observer.last_batch(), s.context.device, t.step));
}

void check_memory_plan_flags(const MemoryFlags& f) {
  if (f.plan_for.empty()) {
    if (f.plan_only) throw UsageError("--plan-only: needs --plan-for (a card such as h100-80gb, or a size such as 24GiB)");
    return;
  }
  (void)parse_plan_target(f.plan_for);
  if (!f.plan_allocator.empty()) (void)parse_allocator_kind(f.plan_allocator);
  (void)parse_plan_batches(f.plan_batches);
}

std::optional<PlanResult> run_memory_plan(const MemoryFlags& f, Session& s, double target_fraction) {
  check_memory_plan_flags(f);
  if (f.plan_for.empty()) return std::nullopt;
  PlanRunOptions o;
  o.target = parse_plan_target(f.plan_for);
  o.allocator = f.plan_allocator.empty() ? AllocatorKind::kCudaCaching : parse_allocator_kind(f.plan_allocator);
  o.target_fraction = target_fraction;
  std::tie(o.batch_a, o.batch_b) = parse_plan_batches(f.plan_batches);
  return plan_from_run(*s.workload, *s.meter, o);
}

}  // namespace saturate::cli

namespace saturate::cli {

int run_plan_only(const MemoryFlags& f, Session& s, double target_fraction, const std::string& json_path) {
  const PlanResult plan = *run_memory_plan(f, s, target_fraction);
  nlohmann::json j = context_json(s.context);
  j["plan"] = plan_json(plan);
  if (json_path != "-") std::cout << with_flags(plan_text(plan));
  if (!json_path.empty()) write_json(j, json_path, std::cout);
  return 0;
}

void add_memory_json(nlohmann::json& j, const SearchResult& result, const std::optional<PlanResult>& plan) {
  if (plan) j["plan"] = plan_json(*plan);
  add_memory_breakdown_json(j, result);
}

}  // namespace saturate::cli

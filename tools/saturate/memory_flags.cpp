#include "memory_flags.h"
#include "option_flags.h"

#include <iostream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/memory/plan_runner.h"
#include "saturate/memory/timeline.h"
#include "saturate/report/memory_text.h"
#include "saturate/session/search_session.h"

namespace saturate::cli {

void add_memory_probe_flags(CLI::App& app, MemoryFlags& f) {
  add_option_flag(app, "empty_cache", f.empty_cache);
  add_option_flag(app, "timeline", f.timeline);
}

void add_plan_flags(CLI::App& app, PlanForOptions& f) {
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

}  // namespace saturate::cli

namespace saturate::cli {

int run_plan_only(const PlanForOptions& f, Session& s, double target_fraction, const std::string& json_path) {
  const PlanResult plan = *run_plan_for(f, s, target_fraction);
  nlohmann::json j = context_json(s.context);
  j["plan"] = plan_json(plan);
  if (json_path != "-") std::cout << with_flags(plan_text(plan));
  if (!json_path.empty()) write_json(j, json_path, std::cout);
  return 0;
}

}  // namespace saturate::cli

#include "memory_flags.h"
#include "option_flags.h"

#include <iostream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/memory/plan_runner.h"
#include "saturate/memory/timeline.h"
#include "saturate/report/memory_text.h"
#include "saturate/session/search_session.h"

namespace saturate::cli {

void add_memory_probe_flags(CLI::App& app, bool& empty_cache, std::string& timeline) {
  add_option_flag(app, "empty_cache", empty_cache);
  add_option_flag(app, "timeline", timeline);
}

void add_plan_flags(CLI::App& app, PlanForOptions& f) {
  add_option_flag(app, "plan_for", f.plan_for);
  add_option_flag(app, "plan_batches", f.plan_batches);
  add_option_flag(app, "plan_allocator", f.plan_allocator);
  add_option_flag(app, "plan_only", f.plan_only);
}

void write_memory_timeline(const std::string& path, const Timeline& t, const Session& s, int64_t batch) {
  write_timeline(t, path,
                 fmt::format("{} batch {} on {}: allocated memory in step {}", s.context.model_name, batch,
                             s.context.device, t.step));
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

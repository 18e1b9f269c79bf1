#include "saturate/session/memory_session.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/report/memory_text.h"
#include "saturate/report/report.h"

namespace saturate {

void MemorySessionOptions::check() const {
  if (batch <= 0)
    throw UsageError("micro_batch", fmt::format("{} is not a positive integer; give the number of samples per step",
                                                batch));
  if (warmup_steps < 0) throw UsageError("warmup_steps", fmt::format("{} is negative", warmup_steps));
  if (leak_check_steps < 0)
    throw UsageError("leak_check_steps", fmt::format("{} is negative; give 0 for no leak check", leak_check_steps));
  if (keep_loss && leak_check_steps == 0)
    throw UsageError("keep_loss", "needs `leak_check_steps` N (the leak check it feeds), e.g. `leak_check_steps` 20");
}

MemorySessionResult run_memory_session(Workload& workload, MemoryMeter& meter, const MemorySessionOptions& options) {
  options.check();
  Probe probe(workload, meter);
  probe.set_footprint(options.step);
  probe.set_empty_cache_before_trials(options.empty_cache);
  MemoryObserver observer(workload);
  probe.add_observer(&observer);
  MemorySessionResult r;
  r.trial = probe.run(options.batch, {options.warmup_steps, 1, 0});
  r.breakdown = observer.last_breakdown();
  r.timeline = build_timeline(observer.last_log());
  r.keep_loss = options.keep_loss;
  r.leak_check_steps = options.leak_check_steps;
  if (options.leak_check_steps > 0) {
    LeakCheckOptions lo;
    lo.batch = options.batch;
    lo.steps = options.leak_check_steps;
    lo.keep_loss_graph = options.keep_loss;
    lo.step.step_config() = options.step.step_config();
    r.leak = run_leak_check(workload, meter, lo);
  }
  return r;
}

nlohmann::json MemorySessionResult::to_json(const RunContext& context) const {
  nlohmann::json j = trial_json(trial);
  j.update(context_json(context));
  nlohmann::json tj = timeline_json(timeline);
  tj.erase("points");  // the points go to a timeline file
  j["timeline"] = tj;
  if (leak) {
    j["leak"] = saturate::to_json(*leak);
    j["leak"]["keep_loss"] = keep_loss;
  }
  return j;
}

std::string MemorySessionResult::to_text(const RunContext& context) const {
  std::ostringstream out;
  print_trial(out, context, trial);
  out << breakdown_table(breakdown) << timeline_summary(timeline);
  if (trial.findings.cache_return)
    out << fmt::format("cache      emptied {} time(s), {:.2f} ms\n", trial.findings.cache_return->calls,
                       trial.findings.cache_return->ms);
  if (leak) out << leak_text(*leak, leak_check_steps);
  return out.str();
}

}  // namespace saturate

#include "saturate/session/probe_session.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "saturate/core/option_doc.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/report/data_text.h"
#include "saturate/report/monitor_text.h"
#include "saturate/report/report.h"

namespace saturate {

void ProbeSessionOptions::check() const {
  check_option_range("batch", static_cast<double>(batch));  // the documented ranges (core/option_doc.h)
  check_option_range("probe.warmup_steps", warmup_steps);
  check_option_range("probe.measure_steps", measure_steps);
  (void)step.footprint();
}

ProbeSessionResult run_probe_session(WorkloadSession& session, const OpenedData& data,
                                     const ProbeSessionOptions& o, const DataEvents& events) {
  o.check();
  const std::optional<MonitorOptions> monitor_options = o.monitor.on(session.device);
  Probe probe(*session.workload, *session.meter);
  probe.set_footprint(o.step.footprint());
  probe.set_empty_cache_before_trials(o.empty_cache);
  MemoryObserver memory(*session.workload);  // memory_breakdown in the JSON
  probe.add_observer(&memory);
  ProbeSessionResult r;
  std::unique_ptr<MonitorObserver> monitor;
  if (monitor_options) {
    MonitorOptions mo = *monitor_options;
    mo.mixed_precision = o.step.footprint().precision == Precision::kBf16 || o.step.footprint().precision == Precision::kFp16;
    monitor = std::make_unique<MonitorObserver>(mo);
    if (!monitor->nvml_note().empty()) r.warnings.push_back(monitor->nvml_note() + "; utilization falls back to /proc");
    probe.add_observer(monitor.get());
  }
  auto feed = attach_data(data, o.data, probe, session, o.batch, events);  // the loader feeds it
  r.trial = probe.run(o.batch, {o.warmup_steps, o.measure_steps, 0});
  if (o.timeline) r.timeline = build_timeline(memory.last_log());
  if (monitor) monitor->finish();
  if (feed) {
    feed->rethrow_error();  // a bad sample is a DataError naming the file
    r.data = feed->source();
  }
  return r;
}

nlohmann::json ProbeSessionResult::to_json(const RunContext& context) const {
  nlohmann::json j = trial_json(trial);
  j.update(context_json(context));
  return j;
}

std::string ProbeSessionResult::to_text(const RunContext& context) const {
  std::ostringstream text;
  print_trial(text, context, trial);
  text << bottleneck_text(trial);
  if (data && trial.findings.data) text << data_text(*data, *trial.findings.data);
  return text.str();
}

}  // namespace saturate

#include "saturate/probe/findings.h"

namespace saturate {

const UtilizationStat* Utilization::field(const std::string& name) const {
  for (const auto& [n, stat] : fields)
    if (n == name) return &stat;
  return nullptr;
}

double PhaseTimes::of(const std::string& phase) const {
  for (const auto& [n, v] : ms)
    if (n == phase) return v;
  return 0;
}

int64_t MemoryBreakdown::parts_sum_bytes() const {
  return parameters_bytes + other_bytes + inputs_bytes + activations_bytes + gradients_bytes + optimizer_state_bytes +
         workspace_bytes + communication_bytes + gathered_parameters_bytes;
}

nlohmann::json WorkerTuning::to_json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : curve)
    points.push_back({{"workers", p.workers},
                      {"samples_per_s", p.samples_per_s},
                      {"step_time_ms", p.step_time_ms},
                      {"data_wait_fraction", p.data_wait_fraction}});
  return {{"workers", workers}, {"reason", reason}, {"curve", points}};
}

nlohmann::json to_json(const Utilization& u) {
  nlohmann::json j = {{"source", u.source}, {"samples", u.samples}, {"sample_hz", u.sample_hz}};
  for (const auto& [name, s] : u.fields) j[name] = {{"mean", s.mean}, {"min", s.min}, {"max", s.max}};
  return j;
}

nlohmann::json to_json(const PhaseTimes& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, ms] : p.ms) j[name] = ms;
  return j;
}

nlohmann::json to_json(const BottleneckFinding& b) {
  nlohmann::json j = {{"verdict", b.verdict}, {"reason", b.reason}, {"evidence", b.evidence}, {"fix", b.fix}};
  if (!b.between.empty()) j["between"] = b.between;
  return j;
}

nlohmann::json to_json(const ComputeFinding& c) {
  nlohmann::json j = {{"flops_per_step", c.flops_per_step}, {"flops_per_sample", c.flops_per_sample}};
  if (c.achieved_flops_per_s) j["achieved_flops_per_s"] = *c.achieved_flops_per_s;
  if (c.mfu) j["mfu"] = *c.mfu;
  if (c.recompute_flops_per_step > 0) j["recompute_flops_per_step"] = c.recompute_flops_per_step;
  if (c.hfu) j["hfu"] = *c.hfu;
  return j;
}

nlohmann::json to_json(const MonitorOverhead& o) {
  return {{"hooks_us_per_step", o.hooks_us_per_step},
          {"sampler_cpu_ms", o.sampler_cpu_ms},
          {"sampler_cpu_share", o.sampler_cpu_share}};
}

nlohmann::json to_json(const MemoryBreakdown& b) {
  nlohmann::json largest = nlohmann::json::array();
  for (const LiveAllocation& a : b.largest_at_peak)
    largest.push_back({{"bytes", a.bytes}, {"part", a.part}, {"phase", a.phase}, {"step", a.step}});
  return {
      {"parameters_bytes", b.parameters_bytes},
      {"gradients_bytes", b.gradients_bytes},
      {"optimizer_state_bytes", b.optimizer_state_bytes},
      {"inputs_bytes", b.inputs_bytes},
      {"activations_bytes", b.activations_bytes},
      {"workspace_bytes", b.workspace_bytes},
      {"communication_bytes", b.communication_bytes},
      {"gathered_parameters_bytes", b.gathered_parameters_bytes},
      {"other_bytes", b.other_bytes},
      {"allocator_overhead_bytes", b.allocator_overhead_bytes},
      {"peak_allocated_bytes", b.peak_allocated_bytes},
      {"peak_reserved_bytes", b.peak_reserved_bytes},
      {"saved_for_backward_bytes", b.saved_for_backward_bytes},
      {"peak_step", b.peak_step},
      {"peak_phase", b.peak_phase},
      {"largest_at_peak", largest},
      {"source", b.source},
      {"truncated", b.truncated},
      {"measured", nlohmann::json::array({"peak_allocated_bytes", "peak_reserved_bytes", "inputs_bytes", "activations_bytes",
                                          "gradients_bytes", "optimizer_state_bytes", "workspace_bytes",
                                          "communication_bytes", "gathered_parameters_bytes",
                                          "saved_for_backward_bytes"})},
      {"exact", nlohmann::json::array({"parameters_bytes"})},
      {"derived", nlohmann::json::array({"other_bytes = live before the trial - parameters",
                                         "allocator_overhead_bytes = peak_reserved - peak_allocated"})},
  };
}

void add_findings_json(const TrialFindings& f, nlohmann::json& j) {
  const StepDescription& s = f.setup;
  if (!s.step.empty()) j["step"] = s.step;
  if (!s.checkpointing.empty()) j["checkpointing"] = s.checkpointing;
  if (!s.precision.empty()) j["precision"] = s.precision;
  if (!s.fast_paths.empty()) j["fast_paths"] = s.fast_paths;
  if (s.global_batch > 0) j["global_batch"] = s.global_batch;
  if (s.prefetched_batches > 0) j["prefetched_batches"] = s.prefetched_batches;
  if (s.prefetched_batch_samples > 0) j["prefetched_batch_samples"] = s.prefetched_batch_samples;
  if (s.eval_batch > 0) j["eval_batch"] = s.eval_batch;
  if (s.resident_data_bytes > 0) j["resident_data_bytes"] = s.resident_data_bytes;
  if (f.cache_return) {
    j["empty_cache_ms"] = f.cache_return->ms;
    j["empty_cache_calls"] = f.cache_return->calls;
  }
  if (!f.rank_status.empty()) j["rank_status"] = f.rank_status;
  if (f.data) {
    const DataFindings& d = *f.data;
    j["data"] = d.dataset;
    j["workers"] = d.workers;
    j["prefetch"] = d.prefetch;
    j["data_wait_ms"] = d.wait_ms;
    j["data_wait_fraction"] = d.wait_fraction;
    j["data_skipped_samples"] = d.skipped_samples;
    if (d.workers_auto) j["workers_auto"] = d.workers_auto->to_json();
  }
  if (f.utilization) j["utilization"] = to_json(*f.utilization);
  if (f.phases) j["phases_ms"] = to_json(*f.phases);
  if (f.bottleneck) j["bottleneck"] = to_json(*f.bottleneck);
  if (f.monitor_overhead) j["monitor_overhead"] = to_json(*f.monitor_overhead);
  if (f.compute) j["compute"] = to_json(*f.compute);
  if (f.memory_breakdown) j["memory_breakdown"] = to_json(*f.memory_breakdown);
}

}  // namespace saturate

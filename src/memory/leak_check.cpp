#include "saturate/memory/leak_check.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/oom.h"
#include "saturate/core/units.h"
#include "saturate/memory/allocation_sites.h"

namespace saturate {

namespace {

constexpr const char* kSitesMethod =
    "CPU allocator event log, each allocation named by the LibTorch operator running when it was made "
    "(RecordFunction): allocations still alive at the end of the site steps, per step";

/// Whether allocation sites can be recorded here: CPU memory seen by our allocator, its log free.
std::string sites_unavailable(const MemoryMeter& meter) {
  if (meter.device().is_cuda()) return "not recorded on CUDA (the CPU allocator's log names sites)";
  if (!cpu_budget_allocator_installed()) return "not recorded: the counting CPU allocator is not installed";
  if (cpu_event_log_active()) return "not recorded: the CPU allocator's event log is in use";
  return "";
}

}  // namespace

std::string leak_sites_text(const std::vector<LeakSite>& sites, size_t top) {
  std::string s;
  for (size_t i = 0; i < sites.size() && i < top; ++i)
    s += fmt::format("{}{} {}/step", i ? ", " : "", sites[i].site,
                     format_bytes(static_cast<int64_t>(sites[i].bytes_per_step)));
  return s;
}

LeakWatch::LeakWatch(MemoryMeter& meter, LeakOptions options) : meter_(meter), detector_(options) {}

LeakWatch::~LeakWatch() {
  if (tracking_) {
    tracking_.reset();
    stop_cpu_event_log();
  }
}

std::string LeakWatch::after_step(int64_t step) {
  detector_.observe(step, meter_.stats().allocated_bytes);
  if (tracking_) {
    step_end_events_.push_back(cpu_event_log_size());
    if (static_cast<int>(step_end_events_.size()) < site_steps_ + 1) return "";
    tracking_.reset();
    const CpuEventLog log = stop_cpu_event_log();
    sites_ = leaked_sites(log, std::vector<size_t>(step_end_events_.begin() + 1, step_end_events_.end()));
    step_end_events_.clear();
    if (sites_.empty()) return "";
    return fmt::format("memory left alive per step, by allocation site: {}", leak_sites_text(sites_));
  }
  if (!detector_.warn_once()) return "";
  if (site_steps_ > 0 && sites_unavailable(meter_).empty()) {
    start_cpu_event_log();
    tracking_ = std::make_unique<AllocationSiteTracking>();
    step_end_events_.push_back(0);  // the window starts now, at the next step's beginning
  }
  const LeakReport r = detector_.report();
  return fmt::format("memory grows by {} per step since step {} ({} -> {}): something keeps tensors alive across "
                     "steps (a kept loss with its graph, a list of outputs); see docs/memory.md",
                     format_bytes(static_cast<int64_t>(r.bytes_per_step)), r.first_step, format_bytes(r.warm_bytes),
                     format_bytes(r.last_bytes));
}

LeakCheckResult run_leak_check(Workload& workload, MemoryMeter& meter, const LeakCheckOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  LeakCheckResult r;
  LeakDetector detector(o.leak);
  Model& model = workload.model();
  const auto sync = [&] {
    if (workload.device().is_cuda()) torch::cuda::synchronize(workload.device().index());
  };
  const int first_site_step = o.site_steps > 0 ? std::max(0, o.steps - o.site_steps) : o.steps;
  const std::string unavailable = o.site_steps > 0 ? sites_unavailable(meter) : "";
  const bool record_sites = o.site_steps > 0 && unavailable.empty() && o.steps - first_site_step >= 2;
  std::unique_ptr<AllocationSiteTracking> tracking;
  std::vector<size_t> step_end_events;
  {
    std::vector<torch::Tensor> kept;
    int step = 0;
    try {
      Batch data = workload.synthetic_batch(o.batch);
      StepOptions so = o.step;
      so.retain_graph = o.keep_loss_graph;
      apply_precision_settings(so.precision);
      TrainingStep training_step(workload, so);
      model.train(true);
      for (; step < o.steps; ++step) {
        if (record_sites && step == first_site_step) {
          start_cpu_event_log();
          tracking = std::make_unique<AllocationSiteTracking>();
        }
        StepResult result = training_step.run(data);
        if (o.keep_loss_graph) kept.push_back(result.graph_loss);
        sync();
        const int64_t bytes = meter.stats().allocated_bytes;
        r.allocated_after_step_bytes.push_back(bytes);
        if (tracking) step_end_events.push_back(cpu_event_log_size());
        detector.observe(step, bytes);
      }
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) {
        if (tracking) {
          tracking.reset();
          stop_cpu_event_log();
        }
        throw;
      }
      r.oom_step = step;
      const std::string what = e.what();
      r.error = what.substr(0, what.find('\n'));
    }
    if (tracking) {  // before `kept` goes: the sites are what is alive at the window's end
      tracking.reset();
      const CpuEventLog log = stop_cpu_event_log();
      r.sites = leaked_sites(log, step_end_events);
      r.sites_method = log.truncated ? std::string(kSitesMethod) + " (log truncated: partial)" : kSitesMethod;
    } else if (o.site_steps > 0) {
      r.sites_method = unavailable.empty() ? "not recorded: fewer than 2 site steps ran" : unavailable;
    }
  }
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  sync();
  r.report = detector.report();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace saturate

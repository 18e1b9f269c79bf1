#include "saturate/memory/leak_check.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "core/host_memory.h"
#include "saturate/core/oom.h"
#include "saturate/core/units.h"
#include "memory/allocation_sites.h"

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

nlohmann::json to_json(const LeakCheckResult& r) {
  nlohmann::json j = leak_json(r.report);
  j["oom_step"] = r.oom_step;
  j["checked"] = r.checked();
  j["steps_needed"] = r.steps_needed;
  j["allocated_after_step_bytes"] = r.allocated_after_step_bytes;
  j["sites"] = leak_sites_json(r.sites);
  j["sites_method"] = r.sites_method;
  j["watches"] = "tensor bytes allocated after each step";
  j["host_growth_bytes"] = r.host_growth_bytes ? nlohmann::json(*r.host_growth_bytes) : nlohmann::json();
  j["host_growth_steps"] = r.host_growth_steps;
  return j;
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

void LeakLoopOptions::check() const {
  if (steps < 1) throw UsageError("steps", fmt::format("{} is not a positive number of steps", steps));
  if (site_steps < 0) throw UsageError("site_steps", fmt::format("{} is negative; 0 records no sites", site_steps));
  if (leak.warmup_steps < 0)
    throw UsageError("warmup_steps", fmt::format("{} is negative; 0 checks from the first step", leak.warmup_steps));
}

LeakCheckResult run_leak_loop(const std::function<void(int step, bool site_step)>& run_step, MemoryMeter& meter,
                              const LeakLoopOptions& o) {
  o.check();
  const auto start = std::chrono::steady_clock::now();
  LeakCheckResult r;
  LeakDetector detector(o.leak);
  const auto sync = [&] {
    if (meter.device().is_cuda()) torch::cuda::synchronize(meter.device().index());
  };
  const int first_site_step = o.site_steps > 0 ? std::max(0, o.steps - o.site_steps) : o.steps;
  const std::string unavailable = o.site_steps > 0 ? sites_unavailable(meter) : "";
  const bool record_sites = o.site_steps > 0 && unavailable.empty() && o.steps - first_site_step >= 2;
  std::unique_ptr<AllocationSiteTracking> tracking;
  bool logging = false;
  std::vector<size_t> step_end_events;
  const auto stop_logging = [&] {
    tracking.reset();
    set_cpu_allocation_site(nullptr);
    logging = false;
    return stop_cpu_event_log();
  };
  int step = 0;
  // the process's resident memory once warm (the detector's warm-up steps), and at the end
  int64_t rss_warm = o.leak.warmup_steps <= 0 ? own_resident_bytes() : -1;
  int warm_step = o.leak.warmup_steps <= 0 ? 0 : -1;
  try {
    for (; step < o.steps; ++step) {
      const bool site_step = record_sites && step >= first_site_step;
      if (site_step && !logging) {
        start_cpu_event_log();
        logging = true;
        if (o.operator_sites) tracking = std::make_unique<AllocationSiteTracking>();
      }
      run_step(step, site_step);
      sync();
      const int64_t bytes = meter.stats().allocated_bytes;
      r.allocated_after_step_bytes.push_back(bytes);
      if (logging) step_end_events.push_back(cpu_event_log_size());
      detector.observe(step, bytes);
      if (step + 1 == o.leak.warmup_steps) {
        rss_warm = own_resident_bytes();
        warm_step = step + 1;
      }
    }
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) {
      if (logging) stop_logging();
      throw;
    }
    r.oom_step = step;
    const std::string what = e.what();
    r.error = what.substr(0, what.find('\n'));
  }
  if (logging) {  // while the caller still holds what the steps kept: the sites are what is alive
    const CpuEventLog log = stop_logging();
    r.sites = leaked_sites(log, step_end_events);
    const std::string method = o.operator_sites || o.sites_method.empty() ? kSitesMethod : o.sites_method;
    r.sites_method = log.truncated ? method + " (log truncated: partial)" : method;
  } else if (o.site_steps > 0) {
    r.sites_method = unavailable.empty() ? "not recorded: fewer than 2 site steps ran" : unavailable;
  }
  sync();
  if (const int64_t rss_end = own_resident_bytes(); rss_warm >= 0 && rss_end >= 0 && step > warm_step) {
    r.host_growth_bytes = rss_end - rss_warm;
    r.host_growth_steps = step - warm_step;
  }
  r.report = detector.report();
  r.steps_needed = o.leak.warmup_steps + o.leak.min_growth_steps;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

LeakCheckResult run_leak_check(Workload& workload, MemoryMeter& meter, const LeakCheckOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  Model& model = workload.model();
  LeakCheckResult r;
  {
    std::vector<torch::Tensor> kept;
    std::optional<TrainingStep> training_step;
    std::optional<StepResult> last;
    Batch data;
    LeakLoopOptions lo;
    lo.steps = o.steps;
    lo.leak = o.leak;
    lo.site_steps = o.site_steps;
    const auto run_step = [&](int step, bool) {
      if (step == 0) {  // the batch and the step are the run's: an OOM making them is the run's
        data = workload.synthetic_batch(o.batch);
        StepOptions so = o.step;
        so.retain_graph = o.keep_loss_graph;
        apply_precision_settings(so.precision);
        training_step.emplace(workload, so);
        model.train(true);
      }
      last = training_step->run(data);  // alive when the step's bytes are read, as a loop's last loss is
      if (o.keep_loss_graph) kept.push_back(last->graph_loss);
    };
    r = run_leak_loop(run_step, meter, lo);  // before `kept` goes
  }
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  if (workload.device().is_cuda()) torch::cuda::synchronize(workload.device().index());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace saturate

// Implements: a leak check over a run of training steps on a workload: the bytes allocated after
// each step go through the LeakDetector. `keep_loss_graph` makes the run leak on purpose, as a
// loop that keeps every step's loss (backward with retain_graph, the loss appended to a list)
// does: each step's graph, with the tensors it saved for backward, stays alive.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/memory/leak_detector.h"
#include "saturate/memory/leak_sites.h"
#include "saturate/step/training_step.h"
#include "saturate/step/workload.h"

namespace saturate {

struct LeakCheckOptions {
  int64_t batch = 8;
  int steps = 50;
  bool keep_loss_graph = false;  ///< the deliberate leak
  /// The step as training runs it (precision, checkpointing, micro-batch); retain_graph is set
  /// from keep_loss_graph.
  StepOptions step;
  LeakOptions leak;
  /// The last this-many steps run with allocation sites recorded (CPU only; 0: none), to name
  /// what the steps leave behind.
  int site_steps = 5;
};

struct LeakCheckResult {
  LeakReport report;
  std::vector<int64_t> allocated_after_step_bytes;
  /// What the site steps left alive, by allocation site (empty: nothing; see sites_method).
  std::vector<LeakSite> sites;
  /// How the sites were found, or why they were not ("" when site_steps was 0).
  std::string sites_method;
  int oom_step = -1;  ///< the step that ran out of memory (the run stops there); -1: none
  /// Steps the verdict needs (the detector's warm-up and growth steps): with fewer observed,
  /// nothing was checked (`checked()` false), whatever `report.detected` says.
  int64_t steps_needed = 0;
  bool checked() const { return report.steps >= steps_needed; }
  /// The verdict watches tensor bytes (allocated after each step); beside it, how much this
  /// process's resident memory grew over the steps after warm-up (Python objects, autograd
  /// graphs held by Python, caches, file buffers: what a tensor count cannot see); negative when
  /// it shrank, none when /proc could not tell or no step ran after warm-up.
  std::optional<int64_t> host_growth_bytes;
  int host_growth_steps = 0;  ///< the steps it grew over
  std::string error;
  double seconds = 0;
};

/// {"detected", ..., "checked", "steps_needed", "oom_step", "allocated_after_step_bytes", "sites",
/// "sites_method"}: the memory JSON's "leak" (docs/memory.md).
nlohmann::json to_json(const LeakCheckResult& r);

class AllocationSiteTracking;

/// For a training loop (saturate train's TrainOptions::on_step): after each step, the meter's
/// allocated bytes go to a LeakDetector; the first time a leak is seen, a one-line warning comes
/// back (once per run), else an empty string.
class LeakWatch {
 public:
  explicit LeakWatch(MemoryMeter& meter, LeakOptions options = {});
  /// After a leak is seen on a CPU run, the next `site_steps` steps record allocation sites; at
  /// their end a second line names the sites that grew.
  std::string after_step(int64_t step);
  LeakReport report() const { return detector_.report(); }
  /// The sites that grew (empty until the site steps after a detection have run).
  const std::vector<LeakSite>& sites() const { return sites_; }
  ~LeakWatch();

 private:
  MemoryMeter& meter_;
  LeakDetector detector_;
  int site_steps_ = 5;
  std::unique_ptr<AllocationSiteTracking> tracking_;
  std::vector<size_t> step_end_events_;
  std::vector<LeakSite> sites_;
};

/// "aten::linear > aten::addmm 1.2 MiB/step, ..." (the first `top`).
std::string leak_sites_text(const std::vector<LeakSite>& sites, size_t top = 3);

/// Runs the steps; an out-of-memory ends the run early and is reported, not thrown. Everything
/// the run made is released before it returns.
LeakCheckResult run_leak_check(Workload& workload, MemoryMeter& meter, const LeakCheckOptions& options);

/// The leak check's loop over any step (a user's own, from Python or C++).
struct LeakLoopOptions {
  int steps = 30;  ///< steps, >= 1 (saturate.leak_check's default)
  LeakOptions leak;
  /// site_steps, >= 0: the last this-many steps record allocation sites (CPU only; 0: none).
  int site_steps = 5;
  /// How the site steps name their allocations: by the LibTorch operator running (true), or by
  /// the caller, who labels what runs with set_cpu_allocation_site (a Python step names its
  /// source lines); `sites_method` then says how.
  bool operator_sites = true;
  std::string sites_method;
  /// UsageError naming the option (steps, site_steps, warmup_steps).
  void check() const;
};
/// `step(k, site_step)` runs step k (site_step: its allocations are being attributed); after
/// each, the meter's allocated bytes go through the LeakDetector. An out-of-memory ends the run
/// and is reported; any other error propagates. The sites are what the site steps left alive
/// while `step`'s owner still holds it (call before releasing what the steps kept).
LeakCheckResult run_leak_loop(const std::function<void(int step, bool site_step)>& step, MemoryMeter& meter,
                              const LeakLoopOptions& options);

}  // namespace saturate

// Implements: `saturate memory` as a library call (docs/memory.md): one training step of the
// workload at a batch, recorded — the breakdown of its peak by kind (parameters, gradients,
// optimizer state, activations, workspace, inputs), its timeline — and optionally a run of steps
// checked for a leak (seed M2). Options in, checked once here; a typed result with to_json and
// to_text out. An out-of-memory is a result (the trial says so), never thrown.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/memory_meter.h"
#include "saturate/memory/breakdown.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/timeline.h"
#include "saturate/probe/workload_trial_step.h"
#include "saturate/report/run_context.h"
#include "saturate/probe/trial.h"

namespace saturate {

struct MemorySessionOptions {
  int64_t batch = 0;        ///< >= 1 samples per step
  int warmup_steps = 1;     ///< >= 0 steps before the recorded one (the first makes the optimizer state)
  int leak_check_steps = 0;  ///< >= 0: also run this many steps and check memory stays flat (0: none)
  /// keep_loss: the leak check keeps every step's loss and graph alive (a deliberate leak, to see
  /// the detector work); needs leak_check_steps.
  bool keep_loss = false;
  /// empty_cache: empty the allocator's cache before the trial and report its cost.
  bool empty_cache = false;
  TrainingFootprint step;  ///< precision and checkpointing of the step
  /// UsageError naming the option.
  void check() const;
};

struct MemorySessionResult {
  Trial trial;                     ///< the recorded step (ok, oom or error)
  MemoryBreakdown breakdown;       ///< its peak by kind
  Timeline timeline;               ///< its allocated memory over time, the top allocations
  std::optional<LeakCheckResult> leak;
  bool keep_loss = false;
  int leak_check_steps = 0;
  /// The memory JSON: the trial, the run context, the timeline (without its points: those go to
  /// a timeline file) and the leak check.
  nlohmann::json to_json(const RunContext& context) const;
  /// For people: the trial, the breakdown table, the timeline's summary, cache and leak lines.
  std::string to_text(const RunContext& context) const;
};

MemorySessionResult run_memory_session(Workload& workload, MemoryMeter& meter, const MemorySessionOptions& options);

}  // namespace saturate

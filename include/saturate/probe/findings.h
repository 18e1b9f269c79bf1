// Implements: what a trial found besides its time and peak, typed: how the step was set up, what
// the data cost, phase times, utilization, the bottleneck verdict, FLOPs, the memory breakdown.
// Observers above the probe (data/, monitor/, memory/) fill these in at trial_end; printers
// (report/) read them; findings_json writes the trial JSON's keys (the JSON contract).
// Plain data: nothing here depends on LibTorch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace saturate {

/// What the trial's step was, beside the batch (TrialStep::describe). Empty/0: the default.
struct StepDescription {
  std::string step;                 ///< a user's step: its name
  std::string checkpointing;        ///< "" when off
  std::string precision;            ///< "" for fp32
  std::string fast_paths;           ///< "" when none
  int64_t global_batch = 0;         ///< set when the step accumulates micro-batches
  int64_t prefetched_batches = 0;   ///< loader batches the footprint holds
  int64_t prefetched_batch_samples = 0;  ///< samples in each of them (a micro- or a global batch)
  int64_t eval_batch = 0;           ///< the evaluation pass's batch, when the footprint has one
  int64_t resident_data_bytes = 0;  ///< prefetched data held on the budget's device
};

/// Cached memory handed back to the device during the trial (after an OOM).
struct CacheReturn {
  int calls = 0;
  double ms = 0;
};

struct WorkerCurvePoint {
  int workers = 0;
  double samples_per_s = 0;
  double step_time_ms = 0;
  double data_wait_fraction = 0;
};

/// `--workers auto`: the choice and every count tried.
struct WorkerTuning {
  int workers = 0;                      ///< the choice
  std::string reason;                   ///< why the search stopped
  std::vector<WorkerCurvePoint> curve;  ///< every count tried, in order
  nlohmann::json to_json() const;
};

/// What the input pipeline cost during the measured steps (data/data_feed.h).
struct DataFindings {
  std::string dataset;
  int workers = 0;
  int prefetch = 0;
  double wait_ms = 0;        ///< mean wait per measured step
  double wait_fraction = 0;  ///< total wait / total step time
  int64_t skipped_samples = 0;
  std::optional<WorkerTuning> workers_auto;  ///< on the trial after `--workers auto` chose
};

struct UtilizationStat {
  double mean = 0, min = 0, max = 0;
};

/// Device/host utilization over the trial's window (monitor/sampler.h).
struct Utilization {
  std::string source;  ///< "nvml" or "proc"
  int64_t samples = 0;
  double sample_hz = 0;
  std::vector<std::pair<std::string, UtilizationStat>> fields;  ///< e.g. gpu_util_percent, cpu_percent
  /// The field's statistics, or null when it was not sampled.
  const UtilizationStat* field(const std::string& name) const;
};

/// Mean milliseconds per step in each phase, in the phases' order (data_wait, h2d, forward, ...).
struct PhaseTimes {
  std::vector<std::pair<std::string, double>> ms;
  /// The phase's milliseconds (0 when absent).
  double of(const std::string& phase) const;
};

/// The bottleneck verdict (monitor/bottleneck.h), as words.
struct BottleneckFinding {
  std::string verdict;  ///< "compute-bound", "data-bound", ...
  std::string reason;   ///< one line with the deciding numbers
  nlohmann::json evidence = nlohmann::json::object();  ///< every number looked at (kind-dependent)
  std::string fix;
  std::vector<std::string> between;  ///< borderline: the verdicts it lies between
};

/// FLOPs counted from the operators of one step (monitor/compute_observer.h).
struct ComputeFinding {
  double flops_per_step = 0;    ///< the model's: each operator once
  double flops_per_sample = 0;
  double recompute_flops_per_step = 0;  ///< checkpointed segments run again in the backward (hardware only)
  std::optional<double> achieved_flops_per_s;  ///< with a step time
  std::optional<double> mfu;                   ///< with a measured peak: the model's FLOPs/s over it, at most 1
  std::optional<double> hfu;                   ///< the hardware's (model + recompute), when it recomputed
};

/// What the monitor's own hooks and sampler cost.
struct MonitorOverhead {
  double hooks_us_per_step = 0;
  double sampler_cpu_ms = 0;
  double sampler_cpu_share = 0;
};

struct LiveAllocation {
  int64_t bytes = 0;
  std::string part;   ///< "inputs", "activations", "gradients", "optimizer_state", "workspace", "communication", "gathered_parameters"
  std::string phase;  ///< the phase it was allocated in ("setup" before the first step)
  int step = -1;
  size_t event_index = 0;  ///< its allocation event
};

/// Where the peak's bytes went (memory/breakdown.h analyses the allocation log into this).
struct MemoryBreakdown {
  int64_t parameters_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t inputs_bytes = 0;
  int64_t activations_bytes = 0;
  int64_t workspace_bytes = 0;
  /// A sharded step's (FSDP2): the collectives' buffers (all-gather output, reduce-scatter input,
  /// the backend's copies) and the units' weights gathered whole; 0 elsewhere.
  int64_t communication_bytes = 0;
  int64_t gathered_parameters_bytes = 0;
  int64_t other_bytes = 0;
  int64_t allocator_overhead_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  /// Live forward allocations at the end of the last complete forward pass.
  int64_t saved_for_backward_bytes = 0;
  int peak_step = -1;
  std::string peak_phase;
  size_t peak_event_index = 0;
  std::vector<LiveAllocation> largest_at_peak;
  std::string source;
  bool truncated = false;
  /// Sum of the parts (without the allocator overhead): equals peak_allocated_bytes.
  int64_t parts_sum_bytes() const;
};

struct TrialFindings {
  StepDescription setup;
  std::optional<CacheReturn> cache_return;
  std::string rank_status;  ///< this rank's own status in a rank-synced trial ("" otherwise)
  std::optional<DataFindings> data;
  std::optional<Utilization> utilization;
  std::optional<PhaseTimes> phases;
  std::optional<BottleneckFinding> bottleneck;
  std::optional<MonitorOverhead> monitor_overhead;
  std::optional<ComputeFinding> compute;
  std::optional<MemoryBreakdown> memory_breakdown;
};

// The JSON each finding has in a trial (the keys of the JSON contract, docs/).
nlohmann::json to_json(const Utilization& u);
nlohmann::json to_json(const PhaseTimes& p);
nlohmann::json to_json(const BottleneckFinding& b);
nlohmann::json to_json(const ComputeFinding& c);
nlohmann::json to_json(const MonitorOverhead& o);
/// The `memory_breakdown` JSON object.
nlohmann::json to_json(const MemoryBreakdown& b);
/// Adds every finding present to `trial_json` under its key (setup keys only when not default).
void add_findings_json(const TrialFindings& f, nlohmann::json& trial_json);

}  // namespace saturate

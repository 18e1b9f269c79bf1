// Implements: printers for trials and searches: JSON (the machine-readable contract) and a
// readable table. One result struct, several printers; the library never writes to stdout
// itself, callers hand in the stream.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/stop_signals.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/report/run_context.h"
#include "saturate/search/decision.h"
#include "saturate/search/search.h"

namespace saturate {

nlohmann::json trial_json(const Trial& t);
/// The search's JSON, with "decision" (search/decision.h) as memory decides it: a caller whose
/// objective ran replaces it with decide_batch(r, &outcome).
nlohmann::json search_json(const RunContext& c, const SearchResult& r);

/// One line per trial, as the search runs (for stderr).
std::string trial_line(const Trial& t);
struct SearchEffort;
/// The table of trials and the answer, for people; `decision` (may be null) leads the answer; `whole_run` (may be null or curves 0) heads it when the run searched
/// several curves, so the header counts every trial that ran.
void print_search(std::ostream& out, const RunContext& c, const SearchResult& r,
                  const BatchDecision* decision = nullptr, const SearchEffort* whole_run = nullptr);
/// Why max_batch is what it is, for its line: exact, capped, nothing fit (and why) or not exact (why).
std::string max_batch_note(const SearchResult& r);
/// The decision's lines for people: the batch to train at, the objective that chose it and why,
/// then each alternative by name.
std::string decision_text(const BatchDecision& decision);
void print_trial(std::ostream& out, const RunContext& c, const Trial& t);

/// FLOPs and MFU of a search (search JSON "compute"): the counted FLOPs per sample of the trial at
/// the throughput batch (else the recommended, else the largest; monitor/compute_observer.h), the
/// rate it ran at, the measured GEMM peak and their ratio (mfu); the analytic figure when known.
/// `trials_others_busy_cpus` (>= 0: read): the other processes' load over the trials; where it is
/// half a CPU or more away from the load the peak was measured under, `load_note` says so (the MFU
/// is against a peak measured under other conditions).
struct ComputeSummary {
  double peak_flops_per_s = 0;
  std::string peak_method;
  int peak_threads = 0;
  std::optional<double> peak_others_busy_cpus;    ///< the other processes' load while the peak ran
  std::optional<double> trials_others_busy_cpus;  ///< ... over the trials
  std::optional<double> peak_first_flops_per_s;   ///< the first peak, when a trial outran it
  std::optional<double> analytic_flops_per_sample;
  std::string load_note;  ///< the load moved between the peak and the trials ("" when not)
  /// At the trial the rate was read at; batch 0: no trial counted FLOPs (the rest is unset).
  int64_t batch = 0;
  double flops_per_sample = 0;
  double recompute_flops_per_step = 0;  ///< > 0: checkpointing's recomputation
  std::optional<double> achieved_flops_per_s;
  std::optional<double> hfu;
  /// With achieved_flops_per_s: the MFU, or none and mfu_note says why.
  std::optional<double> mfu;
  std::string mfu_note;
};
ComputeSummary compute_summary(const SearchResult& r, const GemmPeak& peak,
                               std::optional<double> analytic_flops_per_sample, const std::string& mfu_note = {},
                               double trials_others_busy_cpus = -1);
/// The printers of the summary: the search JSON's `compute` block, and one line for the search
/// table ("" without FLOPs).
nlohmann::json to_json(const ComputeSummary& c);
std::string compute_text(const ComputeSummary& c);

/// Writes `j` to `path` ("-" = stdout): a regular file atomically (temporary file, then rename); a
/// FIFO, a device or /dev/stdout in place; through a symlink to its target (core/output_file.h).
void write_json(const nlohmann::json& j, const std::string& path, std::ostream& stdout_stream);

/// The JSON of a command stopped by a signal before its first training step (a rendezvous, a
/// batch-size search): {"command", "completed": false, "interrupted": {"signal", "exit_status",
/// "after_step": 0, "during", "checkpoint": null}}, the "interrupted" a trained run's summary has.
nlohmann::json stopped_json(const std::string& command, const StoppedBySignal& stop);
/// Writes stopped_json to `path` as write_json does, on rank 0 only (the rank the launcher's
/// environment names; the one that writes a finished run's JSON).
void write_stopped_json(const std::string& command, const std::string& path, const StoppedBySignal& stop,
                        std::ostream& stdout_stream);

}  // namespace saturate

#include "saturate/report/report.h"

#include <nlohmann/json.hpp>
#include "saturate/report/printer.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "core/signal_name.h"
#include "saturate/core/units.h"
#include "saturate/dist/env.h"
#include "saturate/search/decision.h"

namespace saturate {

nlohmann::json trial_json(const Trial& t) {
  nlohmann::json j = {{"batch", t.batch},
                      {"status", to_string(t.status)},
                      {"step_time_ms", t.step_time_ms},
                      {"samples_per_s", t.samples_per_s},
                      {"peak_allocated_bytes", t.peak_allocated_bytes},
                      {"peak_reserved_bytes", t.peak_reserved_bytes},
                      {"pre_optimizer_peak_bytes", t.pre_optimizer_peak_bytes},
                      {"steps", t.steps},
                      {"budget_bytes", t.budget_bytes},
                      {"baseline_bytes", t.baseline_bytes},
                      {"after_bytes", t.after_bytes},
                      {"step_growth_bytes", t.step_growth_bytes},
                      {"seconds", t.seconds}};
  if (!t.error.empty()) j["error"] = t.error;
  add_findings_json(t.findings, j);
  return j;
}

nlohmann::json search_json(const RunContext& c, const SearchResult& r) {
  nlohmann::json j = context_json(c);
  j["strategy"] = to_string(r.strategy);
  j["target_bytes"] = r.target_bytes;
  nlohmann::json trials = nlohmann::json::array();
  for (const Trial& t : r.trials) trials.push_back(trial_json(t));
  j["trials"] = trials;
  j["max_batch"] = r.max_batch;
  j["max_batch_exact"] = r.max_batch_exact;
  j["capped"] = r.capped;
  if (r.confirm_runs > 0)
    j["boundary"] = {{"confirm_runs", r.confirm_runs}, {"confirmed", r.boundary_confirmed}, {"spread", r.boundary_spread}};
  j["recommended_batch"] = r.recommended_batch;
  j["recommended_exact"] = r.recommended_exact;
  j["throughput_batch"] = r.throughput_batch;
  j["memory_model"] = {{"fixed_bytes", static_cast<int64_t>(r.memory_model.fixed_bytes)},
                       {"per_sample_bytes", static_cast<int64_t>(r.memory_model.per_sample_bytes)},
                       {"valid", r.memory_model.valid}};
  j["search_seconds"] = r.search_seconds;
  j["trial_steps"] = r.trial_steps;
  if (!r.error.empty()) j["error"] = r.error;
  j["decision"] = to_json(decide_batch(r));
  return j;
}

std::string trial_line(const Trial& t) {
  std::string line = fmt::format("  batch {:>7}  {:<11} steps {}  peak {:>10}", t.batch, to_string(t.status), t.steps,
                                 format_bytes(t.peak_reserved_bytes));
  if (t.ok()) line += fmt::format("  {:>9.2f} ms/step  {:>10.1f} samples/s", t.step_time_ms, t.samples_per_s);
  return line;
}

namespace {

void print_context(std::ostream& out, const RunContext& c) {
  out << fmt::format("device     {}\nmodel      {} ({} parameters, input {})\noptimizer  {}\nbudget     {}\nbuild      {}\n",
                     c.device_info, c.model_name, c.model_parameters, c.input, c.optimizer,
                     format_bytes(c.budget_bytes), provenance_line(c));
}

}  // namespace

void print_trial(std::ostream& out, const RunContext& c, const Trial& t) {
  print_context(out, c);
  out << fmt::format("batch      {}\nstatus     {}\n", t.batch, to_string(t.status));
  if (t.ok())
    out << fmt::format("step time  {:.2f} ms (median of measured steps)\nthroughput {:.1f} samples/s\n", t.step_time_ms,
                       t.samples_per_s);
  out << fmt::format("peak       {} allocated, {} reserved\n", format_bytes(t.peak_allocated_bytes),
                     format_bytes(t.peak_reserved_bytes));
  if (!t.error.empty()) out << "error      " << t.error << "\n";
}

std::string decision_text(const BatchDecision& d) {
  const std::string objective = to_string(d.objective), requested = to_string(d.requested);
  std::string s = d.batch > 0 ? fmt::format("decision           train at batch {} (objective {}{}): {}\n", d.batch,
                                            objective, requested != objective ? ", asked for " + requested : "",
                                            d.reason)
                              : fmt::format("decision           no batch to train at: {}\n", d.reason);
  for (const BatchAlternative& a : d.alternatives)
    s += fmt::format("  alternative      {} {}: {}\n", a.name, a.batch, a.reason);
  return s;
}

std::string max_batch_note(const SearchResult& r) {
  const std::string failure = r.error.substr(0, r.error.find('\n'));
  if (r.capped) return "capped by `max_batch`";
  if (r.max_batch_exact) return fmt::format("exact: {} does not fit", r.max_batch + 1);
  if (r.max_batch == 0)
    return failure.empty() ? "nothing fit: batch 1 ran out of memory" : "nothing ran to the end: " + failure;
  if (!failure.empty()) return "not exact: a trial failed: " + failure;
  if (r.strategy == Strategy::kPower) return "not exact: the strategy stops at a power of two";
  if (r.strategy == Strategy::kDivisors) {
    int64_t next = 0;  // the smallest divisor above the max that was run: it did not fit
    for (const Trial& t : r.trials)
      if (!t.ok() && t.batch > r.max_batch && (next == 0 || t.batch < next)) next = t.batch;
    if (next) return fmt::format("the largest divisor that fits: the next, {}, does not", next);
  }
  return "not exact: the search stopped before a batch ran out of memory";
}

void print_search(std::ostream& out, const RunContext& c, const SearchResult& r, const BatchDecision* decision,
                  const SearchEffort* whole_run) {
  print_context(out, c);
  if (whole_run && whole_run->curves > 1)
    out << fmt::format("strategy   {} ({} trials over {} curves, {} training steps, {:.1f} s; the table: the chosen "
                       "curve's {} trials)\n\n",
                       to_string(r.strategy), whole_run->trials, whole_run->curves, whole_run->training_steps,
                       whole_run->seconds, r.trials.size());
  else
    out << fmt::format("strategy   {} ({} trials, {} training steps, {:.1f} s)\n\n", to_string(r.strategy),
                       r.trials.size(), r.trial_steps, r.search_seconds);
  out << fmt::format("{:>8}  {:<11} {:>5}  {:>11}  {:>11}  {:>10}  {:>12}\n", "batch", "status", "steps",
                     "peak alloc", "peak resv", "ms/step", "samples/s");
  for (const Trial& t : r.trials) {
    out << fmt::format("{:>8}  {:<11} {:>5}  {:>11}  {:>11}  ", t.batch, to_string(t.status), t.steps,
                       format_bytes(t.peak_allocated_bytes), format_bytes(t.peak_reserved_bytes));
    out << (t.ok() ? fmt::format("{:>10.2f}  {:>12.1f}\n", t.step_time_ms, t.samples_per_s)
                   : fmt::format("{:>10}  {:>12}\n", "-", "-"));
  }
  const double pct = r.budget_bytes ? 100.0 * static_cast<double>(r.target_bytes) / static_cast<double>(r.budget_bytes) : 0;
  out << "\n" << (decision ? decision_text(*decision) : "");
  out << fmt::format("max_batch          {} ({})\n", r.max_batch, max_batch_note(r));
  if (r.confirm_runs > 0)
    out << (r.boundary_confirmed
                ? fmt::format("boundary           confirmed: {} fit and {} failed again ({} re-probe(s))\n", r.max_batch,
                              r.max_batch + 1, r.confirm_runs)
                : fmt::format("boundary           moves between runs by {} batch(es): {} fit in every probe\n",
                              r.boundary_spread, r.max_batch));
  out << fmt::format("recommended_batch  {} (measured peak within {:.0f} % of the budget = {}{})\n",
                     r.recommended_batch, pct, format_bytes(r.target_bytes), r.recommended_exact ? ", exact" : "");
  out << fmt::format("throughput_batch   {} (fastest_probe: the smallest memory probe up to the recommended batch "
                     "within 3 % of the fastest probe's samples/s, one timed step each)\n",
                     r.throughput_batch);
  if (r.memory_model.valid)
    out << fmt::format("memory model       {} + {} per sample\n",
                       format_bytes(static_cast<int64_t>(r.memory_model.fixed_bytes)),
                       format_bytes(static_cast<int64_t>(r.memory_model.per_sample_bytes)));
}

void write_json(const nlohmann::json& j, const std::string& path, std::ostream& stdout_stream) {
  const std::string text = j.dump(2) + "\n";
  if (path == "-") {
    stdout_stream << text << std::flush;
    return;
  }
  // atomic for a regular file; a FIFO, a device or a symlink's target written as the user meant
  write_output_file(path, text, {"`json`", "result.json"});
}

nlohmann::json stopped_json(const std::string& command, const StoppedBySignal& stop) {
  return {{"command", command},
          {"completed", false},
          {"interrupted",
           {{"signal", signal_name(stop.signal())},
            {"exit_status", 128 + stop.signal()},
            {"after_step", 0},
            {"during", stop.where()},
            {"checkpoint", nullptr}}}};
}

void write_stopped_json(const std::string& command, const std::string& path, const StoppedBySignal& stop,
                        std::ostream& stdout_stream) {
  int rank = 0;
  try {
    rank = read_dist_env().rank;
  } catch (const std::exception&) {  // an environment the run refused before it could stop: rank 0's
  }
  if (rank == 0 && !path.empty()) write_json(stopped_json(command, stop), path, stdout_stream);
}

ComputeSummary compute_summary(const SearchResult& r, const GemmPeak& peak,
                               std::optional<double> analytic_flops_per_sample, const std::string& mfu_note,
                               double trials_others_busy_cpus) {
  ComputeSummary s;
  s.peak_flops_per_s = peak.flops_per_s;
  s.peak_method = peak.method();
  s.peak_threads = peak.threads;
  if (peak.others_busy_cpus >= 0) s.peak_others_busy_cpus = peak.others_busy_cpus;
  if (trials_others_busy_cpus >= 0) s.trials_others_busy_cpus = trials_others_busy_cpus;
  // the load moved between the peak's measurement and the trials: the MFU compares rates taken
  // under different conditions (issue 27: flagged, as google/benchmark warns of CPU scaling)
  if (s.peak_others_busy_cpus && s.trials_others_busy_cpus &&
      std::abs(trials_others_busy_cpus - peak.others_busy_cpus) >= 0.5)
    s.load_note = fmt::format("the load moved: {:.1f} other CPUs busy while the peak was measured, {:.1f} over "
                              "the trials; the MFU compares rates taken under different loads",
                              peak.others_busy_cpus, trials_others_busy_cpus);
  if (peak.first_flops_per_s > 0) s.peak_first_flops_per_s = peak.first_flops_per_s;
  s.analytic_flops_per_sample = analytic_flops_per_sample;
  const Trial* at = nullptr;
  for (const int64_t want : {r.throughput_batch, r.recommended_batch, r.max_batch})
    for (const Trial& t : r.trials)
      if (!at && want > 0 && t.batch == want && t.ok() && t.findings.compute && t.findings.compute->achieved_flops_per_s)
        at = &t;
  if (!at)
    for (const Trial& t : r.trials)
      if (t.ok() && t.findings.compute) at = &t;
  if (!at) return s;
  const ComputeFinding& c = *at->findings.compute;
  s.batch = at->batch;
  s.flops_per_sample = c.flops_per_sample;
  s.recompute_flops_per_step = c.recompute_flops_per_step;
  if (c.achieved_flops_per_s) {
    s.achieved_flops_per_s = *c.achieved_flops_per_s;
    if (c.hfu && c.recompute_flops_per_step > 0 && c.flops_per_step > 0) {
      const double hardware = *c.achieved_flops_per_s * (1 + c.recompute_flops_per_step / c.flops_per_step);
      if (hardware <= peak.flops_per_s) s.hfu = hardware / peak.flops_per_s;
    }
    // against the run's last peak (measured again when a trial outran the first): never above 1
    if (c.mfu && peak.flops_per_s >= *c.achieved_flops_per_s)
      s.mfu = *c.achieved_flops_per_s / peak.flops_per_s;
    else
      s.mfu_note = !mfu_note.empty()         ? mfu_note
                   : peak.flops_per_s <= 0 ? std::string("no MFU: no GEMM peak was measured")
                                           : std::string("no MFU: the step's rate is above the GEMM peak measured");
  }
  return s;
}

nlohmann::json to_json(const ComputeSummary& c) {
  nlohmann::json j = {{"peak_flops_per_s", c.peak_flops_per_s}, {"peak_method", c.peak_method},
                      {"flops_method", "counted"}, {"peak_threads", c.peak_threads}};
  if (c.peak_others_busy_cpus) j["peak_others_busy_cpus"] = *c.peak_others_busy_cpus;
  if (c.trials_others_busy_cpus) j["trials_others_busy_cpus"] = *c.trials_others_busy_cpus;
  if (!c.load_note.empty()) j["load_note"] = c.load_note;
  if (c.peak_first_flops_per_s) j["peak_first_flops_per_s"] = *c.peak_first_flops_per_s;
  if (c.analytic_flops_per_sample) j["analytic_flops_per_sample"] = *c.analytic_flops_per_sample;
  if (c.batch == 0) return j;
  j["batch"] = c.batch;
  j["flops_per_sample"] = c.flops_per_sample;
  if (c.recompute_flops_per_step > 0) j["recompute_flops_per_step"] = c.recompute_flops_per_step;
  if (c.achieved_flops_per_s) {
    j["achieved_flops_per_s"] = *c.achieved_flops_per_s;
    if (c.hfu) j["hfu"] = *c.hfu;
    if (c.mfu) {
      j["mfu"] = *c.mfu;
    } else {
      j["mfu"] = nullptr;
      j["mfu_note"] = c.mfu_note;
    }
  }
  return j;
}

std::string compute_text(const ComputeSummary& c) {
  if (c.batch == 0) return "";
  std::string analytic;
  if (c.analytic_flops_per_sample) analytic = fmt::format(", analytic {}", format_flops(*c.analytic_flops_per_sample));
  std::string rate;
  if (c.achieved_flops_per_s && c.mfu)
    rate = fmt::format("; {}/s at batch {} = {:.1f} % MFU of {}/s ({})", format_flops(*c.achieved_flops_per_s),
                       c.batch, 100 * *c.mfu, format_flops(c.peak_flops_per_s), c.peak_method) +
           (c.hfu ? fmt::format("; {:.1f} % HFU with the checkpoints' recomputation", 100 * *c.hfu) : std::string());
  else if (c.achieved_flops_per_s)
    rate = fmt::format("; {}/s at batch {}; {}", format_flops(*c.achieved_flops_per_s), c.batch,
                       c.mfu_note.empty() ? std::string("no MFU") : c.mfu_note);
  if (!c.load_note.empty()) rate += "; " + c.load_note;
  return fmt::format("compute            {}/sample (counted{}){}\n", format_flops(c.flops_per_sample), analytic, rate);
}

}  // namespace saturate

// The page of the HTML report (report/html_report.h): the context block, the sections (the
// decision, each chart or its sentence, the trial table), the style, in one self-contained file.
#include "saturate/report/html_report.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "html_run.h"
#include "saturate/core/errors.h"
#include "report/svg_chart.h"

namespace saturate {

using namespace html;

namespace {

/// A section; `note` explains a chart and is left out when the chart is a sentence instead.
std::string section(const std::string& id, const std::string& title, const std::string& note, const std::string& body) {
  const bool drawn = body.rfind("<p class=\"missing\"", 0) != 0;
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}</section>\n", id, esc(title),
                     note.empty() || !drawn ? "" : "<p class=\"note\">" + note + "</p>\n", body);
}

// ---------------------------------------------------------------------------------------------
// the context block and the trial table

/// Each rank's line: a training's share, split, speed and wait; a search's budget and max.
std::string ranks_cell(const json& j) {
  std::string s;
  const auto it = j.find("ranks");
  if (it == j.end() || !it->is_array()) return s;
  for (const json& r : *it) {
    if (!r.is_object()) continue;
    const auto budget = opt_number(r, "budget_bytes", "ranks");
    const std::string of = budget && *budget > 0 ? " of " + bytes(*budget) : "";
    const auto max = opt_number(r, "max_batch", "ranks");
    if (const auto share = opt_number(r, "share", "ranks"))
      s += fmt::format("<br>rank {}: share {} = micro {} x {}{}{}, {:.0f} samples/s, waits {:.2f} ms a step",
                       number_text(opt_number(r, "rank", "ranks").value_or(0)), number_text(*share),
                       number_text(opt_number(r, "micro_batch", "ranks").value_or(0)),
                       number_text(opt_number(r, "accumulation", "ranks").value_or(0)),
                       max ? " (its max " + number_text(*max) + ")" : std::string(), of,
                       opt_number(r, "samples_per_s", "ranks").value_or(0), opt_number(r, "wait_ms", "ranks").value_or(0));
    else if (max)
      s += fmt::format("<br>rank {}: max {}{}", number_text(opt_number(r, "rank", "ranks").value_or(0)),
                       number_text(*max), of);
  }
  return s;
}

/// The network measured between the ranks (issue 45): bus bandwidth and latency, and the
/// gradients' all-reduce a step predicted from them against the measured one.
std::string network_cell(const json& n) {
  std::string s = fmt::format("all-reduce bus bandwidth {:.1f} MB/s, latency {:.2f} ms",
                              opt_number(n, "busbw_bytes_per_s", "network").value_or(0) / 1e6,
                              opt_number(n, "latency_ms", "network").value_or(0));
  if (const auto predicted = opt_number(n, "predicted_allreduce_ms", "network"))
    s += fmt::format("<br>all-reduce a step: predicted {:.1f} ms, measured {:.1f} ms (the last rank to arrive {:.1f} ms)",
                     *predicted, opt_number(n, "measured_allreduce_ms", "network").value_or(0),
                     opt_number(n, "measured_last_rank_allreduce_ms", "network").value_or(0));
  return s;
}

/// The build that measured: saturate's version and commit, build type, compiler, LibTorch and CUDA.
std::string build_cell(const json& j) {
  std::string versions;
  const json* b = opt_object(j, "build");
  const std::string version = b ? opt_string(*b, "version") : opt_string(j, "saturate_version");
  const std::string torch = b && !opt_string(*b, "libtorch_version").empty() ? opt_string(*b, "libtorch_version")
                                                                            : opt_string(j, "libtorch_version");
  if (!version.empty()) versions += "saturate " + esc(version);
  if (b) {
    std::vector<std::string> how;
    for (const char* k : {"git_commit", "build_type", "compiler"})
      if (!opt_string(*b, k).empty()) how.push_back(esc(opt_string(*b, k)));
    if (!opt_string(*b, "sanitizers").empty()) how.push_back("sanitizers " + esc(opt_string(*b, "sanitizers")));
    for (size_t i = 0; i < how.size(); ++i) versions += (i == 0 ? " (" : ", ") + how[i];
    if (!how.empty()) versions += ")";
  }
  if (!torch.empty()) versions += (versions.empty() ? "" : ", ") + std::string("LibTorch ") + esc(torch);
  if (b && !opt_string(*b, "cuda_version").empty()) versions += ", CUDA " + esc(opt_string(*b, "cuda_version"));
  return versions;
}

std::string context_table(const Run& run) {
  const json& j = run.j;
  std::vector<std::pair<std::string, std::string>> rows;
  rows.push_back({"command", "saturate " + run.kind});
  const std::string device = opt_string(j, "device_info").empty() ? opt_string(j, "device") : opt_string(j, "device_info");
  if (!device.empty()) rows.push_back({"device", esc(device)});
  if (const json* m = opt_object(j, "model")) {
    std::string s = esc(opt_string(*m, "name"));
    const auto params = opt_number(*m, "parameters", "model");
    const std::string input = opt_string(*m, "input");
    if (params || !input.empty())
      s += fmt::format(" ({}{}{})", params ? number_text(*params) + " parameters" : "",
                       params && !input.empty() ? ", " : "", input.empty() ? "" : "input " + esc(input));
    rows.push_back({"model", s});
  } else if (!opt_string(j, "model").empty()) {
    rows.push_back({"model", esc(opt_string(j, "model"))});
  }
  if (!opt_string(j, "data").empty()) rows.push_back({"data", esc(opt_string(j, "data"))});
  if (!opt_string(j, "optimizer").empty()) rows.push_back({"optimizer", esc(opt_string(j, "optimizer"))});
  if (!opt_string(j, "precision").empty()) rows.push_back({"precision", esc(opt_string(j, "precision"))});
  if (run.budget) {
    std::string s = bytes(*run.budget);
    if (run.target)
      s += fmt::format("; target {} ({} of the budget)", bytes(*run.target), percent(*run.target, *run.budget));
    rows.push_back({"memory budget", s});
  }
  if (run.kind == "search" && !opt_string(j, "strategy").empty()) {
    std::string s = esc(opt_string(j, "strategy"));
    s += fmt::format(" ({} trials", run.trials.size());
    if (const auto steps = opt_number(j, "trial_steps", "")) s += fmt::format(", {} training steps", number_text(*steps));
    if (const auto secs = opt_number(j, "search_seconds", "")) s += fmt::format(", {:.1f} s", *secs);
    rows.push_back({"strategy", s + ")"});
  }
  if (const json* cj = opt_object(j, "checkpointing"))
    rows.push_back({"checkpointing", esc(opt_string(*cj, "choice")) + " (policy " + esc(opt_string(*cj, "policy")) + ")"});
  else if (!opt_string(j, "checkpointing").empty())
    rows.push_back({"checkpointing", esc(opt_string(j, "checkpointing"))});
  if (const json* fj = opt_object(j, "fast_paths"))
    rows.push_back({"fast paths", esc(opt_string(*fj, "chosen")) + " (policy " + esc(opt_string(*fj, "policy")) + ")"});
  else if (!opt_string(j, "fast_paths").empty())
    rows.push_back({"fast paths", esc(opt_string(j, "fast_paths"))});
  if (const auto w = opt_number(j, "world_size", ""); w && *w > 1)
    rows.push_back({"ranks", number_text(*w) + " (" + esc(opt_string(j, "backend")) + ")" + ranks_cell(j)});
  if (const json* n = opt_object(j, "network")) rows.push_back({"network", network_cell(*n)});
  if (const json* h = opt_object(j, "host")) {
    std::string s = esc(opt_string(*h, "name"));
    std::vector<std::string> what;
    if (!opt_string(*h, "cpu").empty()) what.push_back(esc(opt_string(*h, "cpu")));
    if (const auto cores = opt_number(*h, "cpu_cores", "host")) what.push_back(number_text(*cores) + " cores");
    for (size_t i = 0; i < what.size(); ++i) s += (i == 0 ? (s.empty() ? "" : " (") : ", ") + what[i];
    if (!what.empty() && !opt_string(*h, "name").empty()) s += ")";
    rows.push_back({"host", s});
  }
  if (!opt_string(j, "gpu_name").empty() && device.find(opt_string(j, "gpu_name")) == std::string::npos)
    rows.push_back({"gpu", esc(opt_string(j, "gpu_name"))});
  if (const std::string versions = build_cell(j); !versions.empty())
    rows.push_back({opt_object(j, "build") ? "build" : "versions", versions});
  std::string s = "<table class=\"context\">\n";
  for (const auto& [k, v] : rows) s += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", esc(k), v);
  return s + "</table>\n";
}

std::string trials_table(const Run& run) {
  std::string s =
      "<table class=\"trials\">\n<thead><tr><th>#</th><th>batch</th><th>status</th><th>peak allocated</th>"
      "<th>peak reserved</th><th>ms/step</th><th>samples/s</th><th>bottleneck</th></tr></thead>\n<tbody>\n";
  const TrialView* rec = run.recommended();
  for (const TrialView& t : run.trials) {
    const json* b = opt_object(*t.j, "bottleneck");
    const std::string error = opt_string(*t.j, "error");
    s += fmt::format("<tr class=\"{}{}\"{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td></tr>\n",
                     status_class(t.status), &t == rec ? " recommended" : "",
                     error.empty() ? "" : " title=\"" + esc(error) + "\"", t.index + 1, number_text(t.batch),
                     esc(t.status), t.peak_allocated ? bytes(*t.peak_allocated) : "-",
                     t.peak_reserved ? bytes(*t.peak_reserved) : "-",
                     t.ok() && t.step_time_ms ? fmt::format("{:.2f}", *t.step_time_ms) : "-",
                     t.ok() && t.samples_per_s ? fmt::format("{:.1f}", *t.samples_per_s) : "-",
                     b ? esc(opt_string(*b, "verdict")) : "");
  }
  return s + "</tbody>\n</table>\n";
}

const char* kStyle = R"css(
:root { color-scheme: light; }
body { font-family: "DejaVu Sans", "Liberation Sans", Helvetica, Arial, sans-serif; color: #1f2937;
       background: #f8fafc; margin: 0; line-height: 1.45; font-size: 15px; }
main { max-width: 1000px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 0 0 8px; }
header p { margin: 0; color: #4b5563; }
section { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
table { border-collapse: collapse; }
table.context th { text-align: left; font-weight: 600; padding: 2px 18px 2px 0; color: #4b5563; vertical-align: top; }
table.context td { padding: 2px 0; }
table.trials { width: 100%; font-size: 13.5px; font-variant-numeric: tabular-nums; }
table.trials th, table.trials td { padding: 3px 8px; text-align: right; border-bottom: 1px solid #f1f5f9; }
table.trials th:nth-child(3), table.trials td:nth-child(3), table.trials th:last-child, table.trials td:last-child { text-align: left; }
table.trials tr.oom td { color: #b91c1c; } table.trials tr.over-target td { color: #b45309; }
table.trials tr.recommended td { background: #ecfdf5; font-weight: 600; }
#decision .lead { font-size: 18px; margin: 0 0 8px; }
#decision ul { margin: 0; padding-left: 20px; } #decision li { margin: 4px 0; }
p.missing { color: #6b7280; font-style: italic; margin: 4px 0; }
p.note { color: #4b5563; margin: 0 0 8px; font-size: 14px; }
code { white-space: nowrap; font-family: "DejaVu Sans Mono", monospace; font-size: 13px; background: #f1f5f9; padding: 0 3px; border-radius: 3px; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: "DejaVu Sans", Arial, sans-serif; }
.chart .plot-area { fill: #fff; stroke: none; }
.chart .grid { stroke: #e5e7eb; stroke-width: 1; }
.chart .axis { stroke: #374151; stroke-width: 1; }
.chart .tick { font-size: 11.5px; fill: #4b5563; }
.chart .axis-label { font-size: 12.5px; fill: #111827; }
.chart .legend-text { font-size: 12px; fill: #111827; }
.chart .line-label { font-size: 11.5px; }
.chart .value-label { font-size: 11px; fill: #374151; }
.chart .ok { fill: #2563eb; stroke: #fff; stroke-width: 1.5; }
.chart .over-target { fill: #f59e0b; stroke: #92400e; stroke-width: 1.5; }
.chart .oom { fill: #dc2626; stroke: #7f1d1d; stroke-width: 1.5; }
.chart .error { fill: #fff; stroke: #6b7280; stroke-width: 2; }
.chart .cross { stroke: #fff; stroke-width: 2; fill: none; }
.chart .law { fill: none; stroke: #7c3aed; stroke-width: 1.8; }
.chart .curve { fill: none; stroke: #2563eb; stroke-width: 1.8; }
.chart line.budget { stroke: #dc2626; stroke-width: 1.6; stroke-dasharray: 7 4; } .chart text.budget { fill: #b91c1c; }
.chart line.target { stroke: #d97706; stroke-width: 1.6; stroke-dasharray: 3 3; } .chart text.target { fill: #b45309; }
.chart line.peak { stroke: #111827; stroke-width: 1.4; stroke-dasharray: 6 3; } .chart text.peak { fill: #111827; }
.chart line.reserved { stroke: #6b7280; stroke-width: 1.2; stroke-dasharray: 2 3; } .chart text.reserved { fill: #4b5563; }
.chart line.marker { stroke: #059669; stroke-width: 1.3; stroke-dasharray: 4 3; } .chart text.marker { fill: #047857; }
.chart line.throughput { stroke: #0891b2; } .chart text.throughput { fill: #0e7490; }
.chart .range { stroke-width: 2; opacity: .45; }
.chart .range.cpu { stroke: #2563eb; } .chart .range.gpu { stroke: #16a34a; }
.chart .series { fill: none; stroke-width: 1.6; } .chart .series.cpu { stroke: #2563eb; } .chart .series.gpu { stroke: #16a34a; }
.chart .series.mem { stroke: #d97706; } .chart .series.other { stroke: #6b7280; }
.chart circle.cpu { fill: #2563eb; stroke: #fff; } .chart circle.gpu { fill: #16a34a; stroke: #fff; }
.chart circle.mem { fill: #d97706; stroke: #fff; } .chart circle.other { fill: #6b7280; stroke: #fff; }
.chart .loss { fill: none; stroke: #2563eb; stroke-width: 1.5; }
.chart .part-parameters { fill: #64748b; } .chart .part-gradients { fill: #0ea5e9; }
.chart .part-optimizer-state { fill: #10b981; } .chart .part-inputs { fill: #f59e0b; }
.chart .part-activations { fill: #3b82f6; } .chart .part-workspace { fill: #a855f7; }
.chart .part-other { fill: #9ca3af; } .chart .part-allocator-overhead { fill: #ef4444; }
.chart .phase-data-wait { fill: #f59e0b; } .chart .phase-h2d { fill: #a855f7; } .chart .phase-forward { fill: #60a5fa; }
.chart .phase-backward { fill: #1d4ed8; } .chart .phase-optimizer { fill: #10b981; } .chart .phase-allreduce { fill: #ef4444; }
.chart .phase-unattributed { fill: #d1d5db; }
.chart rect.segment, .chart rect.bar { stroke: #fff; stroke-width: .5; }
footer { color: #6b7280; font-size: 13px; text-align: center; }
)css";

}  // namespace

std::string render_html_report(const nlohmann::json& j) {
  Run run{j, run_kind(j), {}, std::nullopt, std::nullopt};
  if (run.kind == "search") {
    static const json kNone = json::array();
    const json& trials = j.contains("trials") ? j["trials"] : kNone;  // views point into `j`: no copy
    int i = 0;
    for (const json& t : trials) {
      run.trials.push_back(read_trial(t, i, fmt::format("trials[{}]", i)));
      ++i;
    }
  } else if (run.kind == "train") {
    // --batch auto: the micro-batch search's trials (train JSON "batch_search")
    if (const json* search = opt_object(j, "batch_search"); search && search->contains("trials")) {
      const json& trials = (*search)["trials"];
      if (!trials.is_array())
        throw UsageError(fmt::format("'batch_search.trials': expected an array of trials, got {}", trials.type_name()));
      int i = 0;
      for (const json& t : trials) {
        run.trials.push_back(read_trial(t, i, fmt::format("batch_search.trials[{}]", i)));
        ++i;
      }
    }
  } else {
    run.trials.push_back(read_trial(j, 0, ""));
  }
  run.budget = opt_number(j, "budget_bytes", "");
  if (run.budget && *run.budget <= 0) run.budget.reset();
  run.target = opt_number(j, "target_bytes", "");
  if (run.target && *run.target <= 0) run.target.reset();

  const std::string model = model_name(j);
  const std::string device = opt_string(j, "device");
  const std::string title = fmt::format("saturate {}{}{}", run.kind, model.empty() ? "" : ": " + model,
                                        device.empty() ? "" : " on " + device);
  std::string decision;
  if (run.kind == "search") decision = search_decision(run);
  else if (run.kind == "train") decision = train_decision(run);
  else decision = single_decision(run);

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<meta name=\"generator\" content=\"saturate report\">\n";
  html += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n", esc(title), kStyle);
  html += fmt::format("<header data-kind=\"{}\">\n<h1>{}</h1>\n<p>{}</p>\n</header>\n", run.kind, esc(title),
                      run.kind == "search"   ? "Which batch fits, how fast it runs, and where memory and time go."
                      : run.kind == "train"  ? "How the training run used the machine."
                      : run.kind == "memory" ? "Where the memory of one training step goes."
                                             : "One training step, measured.");
  html += section("context", "Run", "", context_table(run));
  html += section("decision", "Decision", "", decision);
  html += section("peak-memory", "Peak memory against the batch size",
                  run.kind == "search" ? "One mark per trial: its measured peak of reserved memory (a trial that ran "
                                         "out of memory or over the target: the peak it reached before it was "
                                         "stopped). The recommended batch is the largest whose peak stays under the "
                                         "target."
                                       : "",
                  peak_memory_chart(run));
  html += section("throughput", "Throughput against the batch size",
                  run.kind == "search" ? "Samples per second of each trial that ran (timed training steps after a "
                                         "warm-up step)."
                                       : "",
                  throughput_chart(run));
  html += section("memory-breakdown", "Where the memory goes", breakdown_note(run), breakdown_chart(run));
  html += section("phases", "Where the step time goes",
                  run.kind == "search" ? "Mean time per timed step of each trial that ran, split by phase."
                  : run.kind == "train" ? "Mean time per timed step over the run, split by phase."
                                        : "",
                  phases_chart(run));
  html += section("utilization", "Utilization", utilization_note(run), utilization_chart(run));
  if (run.kind == "train") html += section("loss", "Training loss", "", loss_chart(run));
  if (run.kind == "search" && !run.trials.empty())
    html += section("trials", "Trials, in the order they ran", "", trials_table(run));
  html += fmt::format("<footer>Made by <code>saturate report</code> from the JSON of <code>saturate {}</code>{}."
                      "</footer>\n</main>\n</body>\n</html>\n",
                      run.kind,
                      opt_string(j, "saturate_version").empty() ? ""
                                                                : " " + esc(opt_string(j, "saturate_version")));
  return html;
}

}  // namespace saturate

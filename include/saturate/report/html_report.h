// Implements: the HTML report of a run (`saturate report RUN.json`): from the JSON that
// `saturate search`, `memory`, `probe` or `train` writes with --json, one self-contained page
// (inline CSS and inline SVG; no scripts, fonts, images or links to fetch) that opens with the
// run's context and the decision in words (why this batch, what to change), then draws what the
// JSON has data for:
//   chart-peak-memory       peak reserved memory per trial against the batch, out-of-memory and
//                           over-target trials marked apart, the fitted memory law, the budget
//                           and target lines;
//   chart-throughput        samples/s of the trials that ran, against the batch;
//   chart-memory-breakdown  the memory breakdown at the peak (parameters, gradients, optimizer
//                           state, inputs, activations, workspace, ...);
//   chart-phases            time per step split into its phases (per trial, train's run mean, or
//                           memory's recorded step);
//   chart-utilization       CPU/GPU utilization of each trial in the order they ran, or a train
//                           run's over time (each monitor window's mean, from monitor_windows);
//   chart-loss              train's loss per step.
// A chart without data is a sentence (class "missing", data-chart=ID) saying what would add it.
// Every mark carries its values (data-x, data-y, ...) and each <svg> its axis mapping
// (report/svg_chart.h), so a test can check the drawing against the JSON.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace saturate {

/// Which command wrote `run`: "search" (it has trials), "train" (global_batch and steps),
/// "memory" (one trial with a timeline or leak check) or "probe" (one trial). Throws
/// UsageError naming the keys it looked for when `run` is none of these.
std::string run_kind(const nlohmann::json& run);

/// The whole HTML page for `run`. Throws UsageError naming the key when `run` is not a saturate
/// run or a value has the wrong type (e.g. "trials[2].batch: expected a number, got string").
std::string render_html_report(const nlohmann::json& run);

}  // namespace saturate

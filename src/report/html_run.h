// Private: the HTML report's parts (report/html_report.h) and what they share. Implements the
// reading of a run's JSON as the page reads it (html_run.cpp): absent or null is "no data", a
// value of the wrong type is bad input, named by its path; the trials as TrialViews and the
// whole run as a Run. The parts, one file each:
//   html_charts.cpp       peak memory and throughput against the batch, the memory breakdown,
//                         the step phases, train's loss;
//   html_utilization.cpp  utilization: a search's trials in the order they ran, a train run's
//                         monitor windows over time;
//   html_decision.cpp     the decision in words;
//   html_report.cpp       the page: context block, sections, trial table, style.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/svg_chart.h"

namespace saturate::html {

using nlohmann::json;

/// obj[key] as a number; nullopt when absent or null. Throws UsageError naming `path`.key when
/// it is another type.
std::optional<double> opt_number(const json& obj, const char* key, const std::string& path);
/// obj[key] as text: a string as is, null or absent "", anything else its JSON.
std::string opt_string(const json& obj, const char* key);
/// obj[key] when it is an object, else nullptr.
const json* opt_object(const json& obj, const char* key);

std::string esc(const std::string& s);
/// "73 %", "2.4 %", "<0.1 %": small parts keep a digit.
std::string fine_percent(double part, double whole);
std::string bytes(double b);
std::string percent(double part, double whole);

/// One trial as the charts read it: the search's trials[i], or the whole JSON of memory/probe.
struct TrialView {
  int index = 0;
  double batch = 0;
  std::string status;
  std::optional<double> peak_reserved, peak_allocated, samples_per_s, step_time_ms;
  const json* j = nullptr;
  bool ok() const { return status == "ok"; }
};

/// Throws UsageError naming `path` when `t` has no batch or status.
TrialView read_trial(const json& t, int index, const std::string& path);

struct Run {
  const json& j;
  std::string kind;
  std::vector<TrialView> trials;
  std::optional<double> budget, target;

  /// The trial at the recommended batch that ran (the last such: a confirmation re-probe is later).
  const TrialView* recommended() const;
};

std::string model_name(const json& j);

/// A chart without data: the sentence that stands in for it (class "missing", data-chart=ID).
std::string missing(const std::string& chart, const std::string& sentence);

/// The batch axis of the charts against the batch: log2 when the batches span 8x or more.
ChartAxis batch_axis(const std::vector<TrialView>& trials);
/// ok, oom and over-target as they are, any other status "error" (a mark's class).
std::string status_class(const std::string& status);
std::string trial_tooltip(const TrialView& t);

/// A search with no trials: --plan-only predicted for another device and measured nothing here.
bool plan_only(const Run& run);
inline constexpr const char* kPlanOnly =
    "No trials: the run had <code>`plan_only`</code> (a prediction for another device); run it without "
    "<code>`plan_only`</code> to measure here.";

/// The parts of a memory breakdown, in drawing order.
struct Part {
  const char* key;
  const char* name;
};
const std::vector<Part>& breakdown_parts();
/// The breakdown the JSON has: at the top level, else the recommended trial's. `where` says which.
const json* find_breakdown(const Run& run, std::string* where);

// the charts: each an <svg> or, without data, the sentence from missing()
std::string peak_memory_chart(const Run& run);
std::string throughput_chart(const Run& run);
std::string breakdown_chart(const Run& run);
/// What the breakdown chart shows ("" without one).
std::string breakdown_note(const Run& run);
std::string phases_chart(const Run& run);
std::string utilization_chart(const Run& run);
/// The note over chart-utilization when it is drawn ("" for none).
std::string utilization_note(const Run& run);
std::string loss_chart(const Run& run);

// the decision in words: a lead paragraph and a list
std::string search_decision(const Run& run);
std::string single_decision(const Run& run);  ///< memory and probe
std::string train_decision(const Run& run);

}  // namespace saturate::html

// chart-utilization of the HTML report. A search's (probe's) trials in the order they ran: each
// series' mean a point in the trial's slot, its min-max a bar. A train run over time, from its
// monitor_windows: each percentage the windows sampled (cpu_percent, gpu_util_percent,
// mem_util_percent, ...) a step line, level across each window's time at its mean, with a point
// at the window's middle; beyond kMaxWindowMarks windows, consecutive windows merge into one
// mark (their time-weighted mean), as the loss chart merges steps.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "html_run.h"
#include "saturate/core/errors.h"

namespace saturate::html {
namespace {

struct UtilSeries {
  const char* key;
  const char* name;
  const char* cls;
};

constexpr size_t kMaxWindowMarks = 500;

/// The train series in drawing order; another `*_percent` field in the windows is drawn after
/// them as class "other".
const std::vector<UtilSeries>& window_series() {
  static const std::vector<UtilSeries> series = {{"gpu_util_percent", "GPU busy (%)", "gpu"},
                                                 {"mem_util_percent", "GPU memory busy (%)", "mem"},
                                                 {"cpu_percent", "CPU busy (% of one core)", "cpu"}};
  return series;
}

/// One of monitor_windows as the chart reads it.
struct WindowView {
  int index = 0;
  double start_s = 0, seconds = 0;
  std::optional<double> first_step, last_step, samples;
  std::string verdict;
  const json* utilization = nullptr;
  /// The mean of a percentage field; nullopt without it. Throws UsageError naming a wrong type.
  std::optional<double> mean(const std::string& key) const {
    const json* v = utilization ? opt_object(*utilization, key.c_str()) : nullptr;
    return v ? opt_number(*v, "mean", fmt::format("monitor_windows[{}].utilization.{}", index, key)) : std::nullopt;
  }
};

/// The windows that have a start, a length and utilization; `present` says whether the JSON has
/// monitor_windows at all (older builds write none).
std::vector<WindowView> read_windows(const json& j, bool* present) {
  std::vector<WindowView> out;
  *present = j.contains("monitor_windows") && !j["monitor_windows"].is_null();
  if (!*present) return out;
  const json& ws = j["monitor_windows"];
  if (!ws.is_array())
    throw UsageError(fmt::format("monitor_windows: expected an array of windows, got {}", ws.type_name()));
  int i = 0;
  for (const json& w : ws) {
    const std::string path = fmt::format("monitor_windows[{}]", i);
    if (!w.is_object()) throw UsageError(fmt::format("{}: expected an object, got {}", path, w.type_name()));
    WindowView v;
    v.index = i++;
    const auto start = opt_number(w, "start_s", path), seconds = opt_number(w, "seconds", path);
    v.first_step = opt_number(w, "first_step", path);
    v.last_step = opt_number(w, "last_step", path);
    v.verdict = opt_string(w, "verdict");
    v.utilization = opt_object(w, "utilization");
    if (v.utilization) v.samples = opt_number(*v.utilization, "samples", path + ".utilization");
    if (!start || !seconds || !v.utilization) continue;
    v.start_s = *start;
    v.seconds = *seconds;
    out.push_back(v);
  }
  return out;
}

/// The sentence in place of a train run's chart: why there is no series, and the run's summary.
std::string train_sentence(const json& j, bool windows_present, size_t windows) {
  const json* u = opt_object(j, "utilization");
  if (!u && windows == 0)
    return "No utilization in this JSON: the run had <code>`no_monitor`</code>; run it without that flag.";
  std::string s =
      !windows_present
          ? "This JSON has no <code>monitor_windows</code> (an older build), only one utilization summary for the "
            "whole run:"
          : fmt::format("The run had {} monitor window{} with utilization, too few for a series over time (a window "
                        "closes at a progress line once it has lasted 1 s, or after 5 s: a longer run or a smaller "
                        "<code>`log_every`</code> makes more):",
                        windows, windows == 1 ? "" : "s");
  if (u)
    for (const UtilSeries& f : {UtilSeries{"gpu_util_percent", "GPU busy", ""}, UtilSeries{"cpu_percent", "CPU busy", ""}})
      if (const json* v = opt_object(*u, f.key))
        s += fmt::format(" {} {:.0f} % mean ({:.0f}–{:.0f} %);", f.name, opt_number(*v, "mean", "utilization").value_or(0),
                         opt_number(*v, "min", "utilization").value_or(0), opt_number(*v, "max", "utilization").value_or(0));
  return s + " <code>`trace` FILE.json</code> records every sample over time (open it in Perfetto).";
}

/// The series of a run's windows: the known percentages first, then any other *_percent field,
/// each with a mean in some window. `extra` owns the other series' keys (the series point into
/// it: not resized after).
std::vector<UtilSeries> series_of(const std::vector<WindowView>& windows, std::vector<std::string>& extra) {
  std::vector<UtilSeries> series;
  std::vector<std::string> keys;  // the percentages with a mean in some window, in first-seen order
  for (const WindowView& w : windows)
    for (const auto& [key, v] : w.utilization->items())
      if (key.size() > 8 && key.compare(key.size() - 8, 8, "_percent") == 0 && w.mean(key) &&
          std::find(keys.begin(), keys.end(), key) == keys.end())
        keys.push_back(key);
  for (const UtilSeries& f : window_series())
    if (std::find(keys.begin(), keys.end(), f.key) != keys.end()) series.push_back(f);
  for (const std::string& key : keys)
    if (std::none_of(window_series().begin(), window_series().end(), [&](const UtilSeries& f) { return key == f.key; }))
      extra.push_back(key);
  for (const std::string& key : extra) series.push_back({key.c_str(), key.c_str(), "other"});
  return series;
}

/// A train run's utilization over time, from its monitor_windows.
std::string windows_chart(const Run& run) {
  const char* id = "chart-utilization";
  bool present = false;
  const std::vector<WindowView> windows = read_windows(run.j, &present);
  std::vector<std::string> extra;  // owns the keys of the "other" series
  const std::vector<UtilSeries> series = series_of(windows, extra);
  size_t with_means = 0;
  for (const WindowView& w : windows)
    if (std::any_of(series.begin(), series.end(), [&](const UtilSeries& f) { return w.mean(f.key).has_value(); }))
      ++with_means;
  if (with_means < 2) return missing(id, train_sentence(run.j, present, with_means));

  // consecutive windows merge into one mark beyond kMaxWindowMarks
  const size_t per = (windows.size() + kMaxWindowMarks - 1) / kMaxWindowMarks;
  double end_s = 0, ymax = 100;
  for (const WindowView& w : windows) {
    end_s = std::max(end_s, w.start_s + w.seconds);
    for (const UtilSeries& f : series) ymax = std::max(ymax, w.mean(f.key).value_or(0));
  }
  const std::string x_label =
      per > 1 ? fmt::format("time since the run started (s); each mark the mean of {} windows, at their middle", per)
              : std::string("time since the run started (s); each window's mean at its middle");
  SvgChart c(id, "Utilization over the training run, window by window", linear_axis(x_label, 0, end_s, true),
             linear_axis("utilization (%)", 0, ymax * 1.05, true));
  for (const UtilSeries& f : series) {
    std::vector<std::pair<double, double>> steps;  // the level across each window
    struct Mark {
      double x, y;
      ChartAttrs data;
      std::string tooltip;
    };
    std::vector<Mark> marks;
    for (size_t i = 0; i < windows.size(); i += per) {
      const size_t last = std::min(windows.size(), i + per) - 1;
      double weighted = 0, weight = 0, samples = 0;
      size_t n = 0;
      for (size_t k = i; k <= last; ++k)
        if (const auto m = windows[k].mean(f.key)) {
          const double wt = per == 1 ? 1 : std::max(windows[k].seconds, 1e-9);
          weighted += *m * wt;
          weight += wt;
          samples += windows[k].samples.value_or(0);
          ++n;
        }
      if (n == 0) continue;
      const WindowView &a = windows[i], &b = windows[last];
      const double y = weighted / weight, from = a.start_s, to = b.start_s + b.seconds;
      const double x = per == 1 ? a.start_s + a.seconds / 2 : (from + to) / 2;  // as a reader computes it
      steps.push_back({from, y});
      steps.push_back({to, y});
      ChartAttrs data = {{"data-series", f.key},
                         {"data-window", std::to_string(a.index)},
                         {"data-windows", std::to_string(b.index - a.index + 1)},
                         {"data-start-s", number_text(from)},
                         {"data-seconds", number_text(per == 1 ? a.seconds : to - from)}};
      if (a.first_step) data.push_back({"data-first-step", number_text(*a.first_step)});
      if (b.last_step) data.push_back({"data-last-step", number_text(*b.last_step)});
      data.push_back({"data-samples", number_text(samples)});
      if (per == 1 && !a.verdict.empty()) data.push_back({"data-verdict", a.verdict});
      std::string tip = per == 1 ? fmt::format("window {}", a.index + 1)
                                 : fmt::format("windows {}–{}", a.index + 1, b.index + 1);
      if (a.first_step && b.last_step)
        tip += fmt::format(", steps {}–{}", number_text(*a.first_step), number_text(*b.last_step));
      tip += fmt::format(", {:.2f}–{:.2f} s: {} mean {:.1f} %", from, to, f.name, y);
      if (per == 1 && !a.verdict.empty()) tip += ", " + a.verdict;
      marks.push_back({x, y, std::move(data), std::move(tip)});
    }
    if (marks.empty()) continue;
    c.polyline(steps, std::string("series ") + f.cls, {{"data-series", f.key}});
    c.legend(std::string(f.name) + (per > 1 ? ", mean of the windows" : ", window mean"), "point", f.cls);
    for (Mark& m : marks) c.point(m.x, m.y, number_text(m.x), number_text(m.y), f.cls, m.data, m.tooltip);
  }
  return c.svg();
}

/// The trials' utilization in the order they ran (search, probe).
std::string trials_chart(const Run& run) {
  const char* id = "chart-utilization";
  const std::vector<UtilSeries> series = {{"gpu_util_percent", "GPU busy (%)", "gpu"},
                                          {"cpu_percent", "CPU busy (% of one core)", "cpu"}};
  double ymax = 100;
  bool any = false;
  std::vector<std::string> names;
  for (const TrialView& t : run.trials) {
    names.push_back(number_text(t.batch));
    const json* u = opt_object(*t.j, "utilization");
    if (!u) continue;
    for (const UtilSeries& f : series)
      if (const json* v = opt_object(*u, f.key)) {
        any = true;
        ymax = std::max(ymax, opt_number(*v, "max", "utilization").value_or(0));
      }
  }
  if (plan_only(run)) return missing(id, kPlanOnly);
  if (!any) {
    if (run.kind == "memory")
      return missing(id, "<code>saturate memory</code> does not sample utilization; <code>saturate search</code> and "
                         "<code>saturate probe</code> do (the monitor is on unless <code>`no_monitor`</code>).");
    return missing(id, "No utilization in this JSON: the run had <code>`no_monitor`</code>; run it without that flag.");
  }
  if (names.size() > 16) {
    const size_t every = (names.size() + 15) / 16;
    for (size_t i = 0; i < names.size(); ++i)
      if (i % every) names[i].clear();
  }
  SvgChart c(id, "Utilization during each trial, in the order the trials ran",
             category_axis("trials in the order they ran (labelled by batch size)", names),
             linear_axis("utilization (%)", 0, ymax * 1.05, true));
  for (const UtilSeries& f : series) {
    std::vector<std::pair<double, double>> line;
    std::string points;
    for (const TrialView& t : run.trials) {
      const json* u = opt_object(*t.j, "utilization");
      const json* v = u ? opt_object(*u, f.key) : nullptr;
      if (!v) continue;
      const std::string path = run.kind == "search" ? fmt::format("trials[{}].utilization.{}", t.index, f.key)
                                                    : fmt::format("utilization.{}", f.key);
      const auto mean = opt_number(*v, "mean", path), lo = opt_number(*v, "min", path), hi = opt_number(*v, "max", path);
      if (!mean) continue;
      const double x = t.index;
      if (lo && hi)
        c.vsegment(x, *lo, *hi, "range " + std::string(f.cls),
                   {{"data-x", std::to_string(t.index)}, {"data-min", number_text(*lo)}, {"data-max", number_text(*hi)}});
      line.push_back({x, *mean});
    }
    if (line.empty()) continue;
    c.polyline(line, std::string("series ") + f.cls);
    c.legend(std::string(f.name) + ", mean and min–max", "point", f.cls);
  }
  for (const UtilSeries& f : series)
    for (const TrialView& t : run.trials) {
      const json* u = opt_object(*t.j, "utilization");
      const json* v = u ? opt_object(*u, f.key) : nullptr;
      if (!v || !opt_number(*v, "mean", "utilization")) continue;
      const double mean = *opt_number(*v, "mean", "utilization");
      c.point(t.index, mean, std::to_string(t.index), number_text(mean), f.cls,
              {{"data-trial", std::to_string(t.index)},
               {"data-series", f.key},
               {"data-batch", number_text(t.batch)},
               {"data-status", t.status},
               {"data-samples", number_text(opt_number(*u, "samples", "utilization").value_or(0))}},
              fmt::format("trial {} (batch {}, {}): {} mean {:.1f} %", t.index + 1, number_text(t.batch), t.status,
                          f.name, mean));
    }
  return c.svg();
}

}  // namespace

std::string utilization_note(const Run& run) {
  if (run.kind == "train") {
    bool present = false;
    const std::vector<WindowView> windows = read_windows(run.j, &present);
    std::string how;
    if (!windows.empty()) {
      const json& u = *windows.front().utilization;
      const std::string source = opt_string(u, "source");
      how = fmt::format(" Sampled at {} Hz {}.",
                        number_text(opt_number(u, "sample_hz", "monitor_windows[0].utilization").value_or(0)),
                        source == "proc"   ? "from /proc"
                        : source == "nvml" ? "through NVML"
                                           : "from " + esc(source));
    }
    return "Mean utilization of each monitor window of the run (a window closes at a progress line once it has "
           "lasted 1 s, after 5 s without one, and at the end of the run): a level across the window's time, a "
           "point at its middle. CPU is in % of one core (200 % = two cores busy)." +
           how;
  }
  return run.kind == "search" ? "Mean utilization sampled during each trial; the bar spans the samples' minimum to "
                                "maximum."
                              : "";
}

std::string utilization_chart(const Run& run) { return run.kind == "train" ? windows_chart(run) : trials_chart(run); }

}  // namespace saturate::html

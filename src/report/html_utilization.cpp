// chart-utilization of the HTML report: a search's trials in the order they ran (the mean of
// each series a point, its min-max a bar).
#include <algorithm>

#include <fmt/format.h>

#include "html_run.h"

namespace saturate::html {
namespace {

struct UtilSeries {
  const char* key;
  const char* name;
  const char* cls;
};

}  // namespace

std::string utilization_note(const Run& run) {
  return run.kind == "search" ? "Mean utilization sampled during each trial; the bar spans the samples' minimum to "
                                "maximum."
                              : "";
}

std::string utilization_chart(const Run& run) {
  const char* id = "chart-utilization";
  if (run.kind == "train") {
    const json* u = opt_object(run.j, "utilization");
    if (!u)
      return missing(id, "No utilization in this JSON: the run had <code>--no-monitor</code>; run it without that flag.");
    std::string s = "<code>saturate train</code> writes one utilization summary for the whole run, no series over time:";
    for (const UtilSeries& f : {UtilSeries{"gpu_util_percent", "GPU busy", ""}, UtilSeries{"cpu_percent", "CPU busy", ""}})
      if (const json* v = opt_object(*u, f.key))
        s += fmt::format(" {} {:.0f} % mean ({:.0f}–{:.0f} %);", f.name, opt_number(*v, "mean", "utilization").value_or(0),
                         opt_number(*v, "min", "utilization").value_or(0), opt_number(*v, "max", "utilization").value_or(0));
    s += " <code>--trace FILE.json</code> records every sample over time (open it in Perfetto).";
    return missing(id, s);
  }
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
                         "<code>saturate probe</code> do (the monitor is on unless <code>--no-monitor</code>).");
    return missing(id, "No utilization in this JSON: the run had <code>--no-monitor</code>; run it without that flag.");
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

}  // namespace saturate::html

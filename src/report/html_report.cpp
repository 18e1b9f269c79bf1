#include "saturate/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/report/svg_chart.h"

namespace saturate {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// reading the JSON: absent or null is "no data"; a value of the wrong type is bad input, named.

std::optional<double> opt_number(const json& obj, const char* key, const std::string& path) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const json& v = obj[key];
  if (!v.is_number())
    throw UsageError(fmt::format("{}{}: expected a number, got {} {}", path.empty() ? "" : path + ".", key,
                                 v.type_name(), v.dump().substr(0, 40)));
  return v.get<double>();
}

std::string opt_string(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return "";
  const json& v = obj[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

const json* opt_object(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_object()) return nullptr;
  return &obj[key];
}

std::string esc(const std::string& s) { return html_escape(s); }
/// "73 %", "2.4 %", "<0.1 %": small parts keep a digit.
std::string fine_percent(double part, double whole) {
  if (!(whole > 0)) return "-";
  const double p = 100.0 * part / whole;
  if (p == 0) return "0 %";
  if (p > 0 && p < 0.1) return "<0.1 %";
  return p < 10 ? fmt::format("{:.1f} %", p) : fmt::format("{:.0f} %", p);
}
std::string bytes(double b) { return format_bytes(static_cast<int64_t>(std::llround(b))); }
std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.0f} %", 100.0 * part / whole) : std::string("-");
}

/// One trial as the charts read it: the search's trials[i], or the whole JSON of memory/probe.
struct TrialView {
  int index = 0;
  double batch = 0;
  std::string status;
  std::optional<double> peak_reserved, peak_allocated, samples_per_s, step_time_ms;
  const json* j = nullptr;
  bool ok() const { return status == "ok"; }
};

TrialView read_trial(const json& t, int index, const std::string& path) {
  if (!t.is_object()) throw UsageError(fmt::format("{}: expected an object, got {}", path, t.type_name()));
  TrialView v;
  v.index = index;
  v.j = &t;
  const auto batch = opt_number(t, "batch", path);
  if (!batch) throw UsageError(fmt::format("{}: no 'batch' (every trial has its batch size)", path));
  v.batch = *batch;
  if (!t.contains("status") || !t["status"].is_string())
    throw UsageError(fmt::format("{}: no 'status' string (ok, oom, over-target or error)", path));
  v.status = t["status"].get<std::string>();
  v.peak_reserved = opt_number(t, "peak_reserved_bytes", path);
  v.peak_allocated = opt_number(t, "peak_allocated_bytes", path);
  v.samples_per_s = opt_number(t, "samples_per_s", path);
  v.step_time_ms = opt_number(t, "step_time_ms", path);
  return v;
}

struct Run {
  const json& j;
  std::string kind;
  std::vector<TrialView> trials;
  std::optional<double> budget, target;

  /// The trial at the recommended batch that ran (the last such: a confirmation re-probe is later).
  const TrialView* recommended() const {
    if (kind != "search") return trials.empty() ? nullptr : &trials.front();
    const auto rec = opt_number(j, "recommended_batch", "");
    const TrialView* found = nullptr;
    for (const TrialView& t : trials)
      if (rec && t.batch == *rec && t.ok()) found = &t;
    return found;
  }
};

std::string model_name(const json& j) {
  if (const json* m = opt_object(j, "model")) return opt_string(*m, "name");
  return opt_string(j, "model");
}

std::string missing(const std::string& chart, const std::string& sentence) {
  return fmt::format("<p class=\"missing\" data-chart=\"{}\">{}</p>\n", chart, sentence);
}

/// A section; `note` explains a chart and is left out when the chart is a sentence instead.
std::string section(const std::string& id, const std::string& title, const std::string& note, const std::string& body) {
  const bool drawn = body.rfind("<p class=\"missing\"", 0) != 0;
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}</section>\n", id, esc(title),
                     note.empty() || !drawn ? "" : "<p class=\"note\">" + note + "</p>\n", body);
}

/// The batch axis of the charts against the batch: log2 when the batches span 8x or more.
ChartAxis batch_axis(const std::vector<TrialView>& trials) {
  double lo = trials.front().batch, hi = lo;
  for (const TrialView& t : trials) {
    lo = std::min(lo, t.batch);
    hi = std::max(hi, t.batch);
  }
  const std::string label = "batch size (samples per step)";
  if (lo >= 1 && hi / lo >= 8) {
    ChartAxis a = log2_axis(label + ", log scale", lo, hi);
    return a;
  }
  return linear_axis(label, 0, hi * 1.15, true);
}

std::string status_class(const std::string& status) {
  if (status == "ok" || status == "oom" || status == "over-target") return status;
  return "error";
}

std::string trial_tooltip(const TrialView& t) {
  std::string s = fmt::format("trial {}: batch {}, {}", t.index + 1, number_text(t.batch), t.status);
  if (t.peak_reserved) s += ", peak reserved " + bytes(*t.peak_reserved);
  if (t.ok() && t.samples_per_s) s += fmt::format(", {:.1f} samples/s", *t.samples_per_s);
  const std::string error = opt_string(*t.j, "error");
  if (!error.empty()) s += " — " + error;
  return s;
}

// ---------------------------------------------------------------------------------------------
// 1. peak memory against the batch

/// A search with no trials: --plan-only predicted for another device and measured nothing here.
bool plan_only(const Run& run) { return run.kind == "search" && run.trials.empty() && opt_object(run.j, "plan"); }
constexpr const char* kPlanOnly =
    "No trials: the run had <code>--plan-only</code> (a prediction for another device); run it without "
    "<code>--plan-only</code> to measure here.";

std::string peak_memory_chart(const Run& run) {
  const char* id = "chart-peak-memory";
  if (plan_only(run)) return missing(id, kPlanOnly);
  std::vector<const TrialView*> pts;
  for (const TrialView& t : run.trials)
    if (t.peak_reserved) pts.push_back(&t);
  if (pts.empty()) {
    if (run.kind == "train")
      return missing(id, "No peak memory per batch: <code>saturate train</code> runs one batch and records none; "
                         "<code>saturate search --json FILE</code> measures it, and its report draws this chart.");
    return missing(id, "No trial in this JSON recorded its peak (<code>peak_reserved_bytes</code>).");
  }
  double ymax = 0;
  for (const TrialView* t : pts) ymax = std::max(ymax, *t->peak_reserved);
  if (run.budget) ymax = std::max(ymax, *run.budget);
  if (run.target) ymax = std::max(ymax, *run.target);
  SvgChart c(id, "Peak reserved memory per trial against the batch size", batch_axis(run.trials),
             bytes_axis("peak reserved memory", ymax * 1.04));
  const ChartAxis& x = c.x_axis();
  const double ytop = c.y_axis().max;

  c.legend("fits", "point", "ok");
  bool any_over = false, any_oom = false, any_error = false;
  for (const TrialView* t : pts) {
    any_over = any_over || t->status == "over-target";
    any_oom = any_oom || t->status == "oom";
    any_error = any_error || status_class(t->status) == "error";
  }
  if (any_over) c.legend("over the target", "point", "over-target");
  if (any_oom) c.legend("out of memory", "cross", "oom");
  if (any_error) c.legend("failed", "point", "error");

  // the fitted law, clipped to the plot
  const json* law = opt_object(run.j, "memory_model");
  if (law && law->value("valid", false)) {
    const double fixed = opt_number(*law, "fixed_bytes", "memory_model").value_or(0);
    const double per = opt_number(*law, "per_sample_bytes", "memory_model").value_or(0);
    std::vector<std::pair<double, double>> line;
    const int n = x.scale == AxisScale::kLog2 ? 64 : 1;
    for (int i = 0; i <= n && fixed <= ytop; ++i) {
      const double f = static_cast<double>(i) / n;
      const double b = x.scale == AxisScale::kLog2 ? x.min * std::pow(x.max / x.min, f) : x.min + (x.max - x.min) * f;
      const double y = fixed + per * b;
      if (y > ytop) {
        if (per > 0) line.push_back({(ytop - fixed) / per, ytop});
        break;
      }
      line.push_back({b, y});
    }
    if (line.size() >= 2) {
      c.polyline(line, "law", {{"data-fixed-bytes", number_text(fixed)}, {"data-per-sample-bytes", number_text(per)}});
      c.legend(fmt::format("fitted law {} + {}/sample", bytes(fixed), bytes(per)), "line", "law");
    }
  }
  if (run.budget) {
    c.hline(*run.budget, number_text(*run.budget), "budget", "budget " + bytes(*run.budget));
    c.legend("budget", "line", "budget");
  }
  if (run.target) {
    c.hline(*run.target, number_text(*run.target), "target",
            fmt::format("target {}", run.budget ? percent(*run.target, *run.budget) : bytes(*run.target)));
    c.legend("target", "line", "target");
  }
  if (const TrialView* rec = run.recommended(); rec && run.kind == "search")
    c.vline(rec->batch, number_text(rec->batch), "marker recommended", "recommended " + number_text(rec->batch));
  for (const TrialView* t : pts)
    c.point(t->batch, *t->peak_reserved, number_text(t->batch), number_text(*t->peak_reserved), status_class(t->status),
            {{"data-trial", std::to_string(t->index)}, {"data-status", t->status}}, trial_tooltip(*t),
            t->status == "oom");
  return c.svg();
}

// ---------------------------------------------------------------------------------------------
// 2. samples/s against the batch

std::string throughput_chart(const Run& run) {
  const char* id = "chart-throughput";
  if (plan_only(run)) return missing(id, kPlanOnly);
  std::vector<const TrialView*> pts;
  for (const TrialView& t : run.trials)
    if (t.ok() && t.samples_per_s && *t.samples_per_s > 0) pts.push_back(&t);
  if (run.kind == "train") {
    const auto sps = opt_number(run.j, "samples_per_s", "");
    const auto gb = opt_number(run.j, "global_batch", "");
    return missing(id, fmt::format("One batch trained ({} samples/s at global batch {}); "
                                   "<code>saturate search --json FILE</code> measures samples/s across batches.",
                                   sps ? fmt::format("{:.1f}", *sps) : "-", gb ? number_text(*gb) : "-"));
  }
  if (run.kind != "search") {
    if (pts.empty()) return missing(id, "The measured batch did not run to the end: no samples/s.");
    return missing(id, fmt::format("One batch measured ({:.1f} samples/s at batch {}); "
                                   "<code>saturate search --json FILE</code> measures samples/s across batches.",
                                   *pts.front()->samples_per_s, number_text(pts.front()->batch)));
  }
  if (pts.size() < 2)
    return missing(id, fmt::format("{} trial(s) ran to the end: too few for a curve.", pts.size()));
  double ymax = 0;
  for (const TrialView* t : pts) ymax = std::max(ymax, *t->samples_per_s);
  SvgChart c(id, "Samples per second against the batch size", batch_axis(run.trials),
             linear_axis("training throughput (samples/s)", 0, ymax * 1.08, true));
  std::vector<const TrialView*> sorted = pts;
  std::stable_sort(sorted.begin(), sorted.end(), [](const TrialView* a, const TrialView* b) { return a->batch < b->batch; });
  std::vector<std::pair<double, double>> line;
  for (const TrialView* t : sorted) line.push_back({t->batch, *t->samples_per_s});
  c.polyline(line, "curve");
  c.legend("measured trial", "point", "ok");
  const TrialView* rec = run.recommended();
  const auto tb = opt_number(run.j, "throughput_batch", "");
  if (rec) {
    const bool same = tb && *tb == rec->batch;
    c.vline(rec->batch, number_text(rec->batch), "marker recommended",
            (same ? "recommended = throughput " : "recommended ") + number_text(rec->batch));
  }
  if (tb && *tb > 0 && !(rec && *tb == rec->batch))
    c.vline(*tb, number_text(*tb), "marker throughput", "throughput " + number_text(*tb));
  for (const TrialView* t : pts)
    c.point(t->batch, *t->samples_per_s, number_text(t->batch), number_text(*t->samples_per_s), "ok",
            {{"data-trial", std::to_string(t->index)}}, trial_tooltip(*t));
  return c.svg();
}

// ---------------------------------------------------------------------------------------------
// 3. memory breakdown at the peak

struct Part {
  const char* key;
  const char* name;
};
const std::vector<Part>& breakdown_parts() {
  static const std::vector<Part> parts = {
      {"parameters_bytes", "parameters"},         {"gradients_bytes", "gradients"},
      {"optimizer_state_bytes", "optimizer state"}, {"inputs_bytes", "inputs"},
      {"activations_bytes", "activations"},       {"workspace_bytes", "workspace"},
      {"other_bytes", "other"},                   {"allocator_overhead_bytes", "allocator overhead"}};
  return parts;
}

/// The breakdown the JSON has: at the top level, else the recommended trial's. `where` says which.
const json* find_breakdown(const Run& run, std::string* where) {
  if (const json* b = opt_object(run.j, "memory_breakdown")) {
    *where = "memory_breakdown";
    return b;
  }
  if (const TrialView* rec = run.recommended())
    if (const json* b = opt_object(*rec->j, "memory_breakdown")) {
      *where = fmt::format("trials[{}].memory_breakdown", rec->index);
      return b;
    }
  return nullptr;
}

std::string breakdown_chart(const Run& run) {
  const char* id = "chart-memory-breakdown";
  std::string where;
  const json* b = find_breakdown(run, &where);
  if (!b) {
    if (plan_only(run)) return missing(id, kPlanOnly);
    if (run.kind == "train")
      return missing(id, fmt::format("<code>saturate train</code> records no memory breakdown; "
                                     "<code>saturate memory --batch {} --json FILE</code> does.",
                                     number_text(opt_number(run.j, "micro_batch", "").value_or(64))));
    return missing(id, "No <code>memory_breakdown</code> in this JSON; "
                       "<code>saturate memory --batch N --json FILE</code> records one.");
  }
  std::vector<std::string> names;
  std::vector<std::pair<std::string, double>> values;
  for (const Part& p : breakdown_parts())
    if (const auto v = opt_number(*b, p.key, where)) {
      names.push_back(p.name);
      values.push_back({p.key, *v});
    }
  if (values.empty()) return missing(id, "The memory breakdown in this JSON has no parts.");
  const auto peak = opt_number(*b, "peak_allocated_bytes", where);
  const auto reserved = opt_number(*b, "peak_reserved_bytes", where);
  double ymax = peak.value_or(0);
  for (const auto& [k, v] : values) ymax = std::max(ymax, v);
  if (reserved) ymax = std::max(ymax, *reserved);
  SvgChart c(id, "Memory at the peak, by part", category_axis("part of the memory at the peak", names),
             bytes_axis("bytes live at the peak", ymax * 1.04));
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& [key, v] = values[i];
    std::string part = key.substr(0, key.size() - 6);  // without _bytes
    std::replace(part.begin(), part.end(), '_', '-');
    c.bar(static_cast<int>(i), 0, v, "bar part-" + part,
          {{"data-x", key}, {"data-y", number_text(v)}, {"data-slot", std::to_string(i)}},
          fmt::format("{}: {} ({} of the peak)", names[i], bytes(v), percent(v, peak.value_or(0))));
    c.label(c.x_px(static_cast<double>(i)), c.y_px(v) - (peak ? 19 : 6), bytes(v));
    if (peak) c.label(c.x_px(static_cast<double>(i)), c.y_px(v) - 6, fine_percent(v, *peak));
  }
  if (peak) {
    c.hline(*peak, number_text(*peak), "peak", "peak " + bytes(*peak));
    c.legend("peak allocated (the parts add up to it)", "line", "peak");
  }
  if (reserved && peak && *reserved > *peak) {
    c.hline(*reserved, number_text(*reserved), "reserved", "reserved " + bytes(*reserved));
    c.legend("peak reserved", "line", "reserved");
  }
  return c.svg();
}

std::string breakdown_note(const Run& run) {
  std::string where;
  const json* b = find_breakdown(run, &where);
  if (!b) return "";
  const auto batch = opt_number(*b, "batch", where);
  const std::string phase = opt_string(*b, "peak_phase");
  const auto step = opt_number(*b, "peak_step", where);
  const std::string source = opt_string(*b, "source");
  std::string s = "At the peak";
  if (batch) s += " of batch " + number_text(*batch);
  else if (const TrialView* t = run.recommended()) s += " of batch " + number_text(t->batch);
  if (!phase.empty()) s += fmt::format(" (step {}, {})", step ? number_text(*step) : "?", esc(phase));
  if (!source.empty()) s += ", from the " + esc(source);
  s += ". Each bar is a part of the allocated memory; together they add up to the peak.";
  if (const auto saved = opt_number(*b, "saved_for_backward_bytes", where))
    s += fmt::format(" Forward saved {} for backward.", bytes(*saved));
  return s;
}

// ---------------------------------------------------------------------------------------------
// 4. step phases, stacked

const std::vector<std::string>& phase_order() {
  static const std::vector<std::string> order = {"data_wait", "h2d", "forward", "backward", "optimizer", "allreduce"};
  return order;
}

struct PhaseBar {
  std::string label;      ///< the category's label
  std::string data_x;     ///< the bar's data-x
  std::vector<std::pair<std::string, double>> phases;  ///< in drawing order
  std::optional<double> step_ms;
  std::string source;     ///< where the numbers are in the JSON
};

std::vector<std::pair<std::string, double>> ordered_phases(const json& p, const std::string& path) {
  std::vector<std::pair<std::string, double>> out;
  for (const std::string& name : phase_order())
    if (const auto v = opt_number(p, name.c_str(), path)) out.push_back({name, *v});
  for (const auto& [name, v] : p.items())
    if (std::find(phase_order().begin(), phase_order().end(), name) == phase_order().end())
      if (const auto n = opt_number(p, name.c_str(), path)) out.push_back({name, *n});
  return out;
}

std::vector<PhaseBar> phase_bars(const Run& run) {
  std::vector<PhaseBar> bars;
  if (run.kind == "train") {
    if (const json* p = opt_object(run.j, "phases_ms")) {
      PhaseBar b;
      const auto steps = opt_number(run.j, "steps", "");
      b.label = fmt::format("run mean ({} steps)", steps ? number_text(*steps) : "?");
      b.data_x = "run";
      b.phases = ordered_phases(*p, "phases_ms");
      b.source = "phases_ms";
      bars.push_back(b);
    }
    return bars;
  }
  std::vector<const TrialView*> with;
  for (const TrialView& t : run.trials)
    if (t.ok() && opt_object(*t.j, "phases_ms")) with.push_back(&t);
  std::stable_sort(with.begin(), with.end(), [](const TrialView* a, const TrialView* b) { return a->batch < b->batch; });
  for (const TrialView* t : with) {
    PhaseBar b;
    b.label = number_text(t->batch);
    b.data_x = number_text(t->batch);
    const std::string path = run.kind == "search" ? fmt::format("trials[{}].phases_ms", t->index) : "phases_ms";
    b.phases = ordered_phases((*t->j)["phases_ms"], path);
    b.step_ms = t->step_time_ms;
    b.source = path;
    bars.push_back(b);
  }
  // memory: the recorded step's phases from its timeline
  if (bars.empty() && run.kind == "memory")
    if (const json* tl = opt_object(run.j, "timeline"); tl && tl->contains("phases") && (*tl)["phases"].is_array()) {
      PhaseBar b;
      b.label = fmt::format("batch {}, recorded step", run.trials.empty() ? "?" : number_text(run.trials[0].batch));
      b.data_x = run.trials.empty() ? "" : number_text(run.trials[0].batch);
      b.source = "timeline.phases";
      int i = 0;
      for (const json& p : (*tl)["phases"]) {
        const std::string path = fmt::format("timeline.phases[{}]", i++);
        const auto begin = opt_number(p, "begin_ms", path), end = opt_number(p, "end_ms", path);
        const std::string name = opt_string(p, "phase");
        if (begin && end && !name.empty()) b.phases.push_back({name, *end - *begin});
      }
      b.step_ms = opt_number(*tl, "duration_ms", "timeline");
      if (!b.phases.empty()) bars.push_back(b);
    }
  return bars;
}

std::string phases_chart(const Run& run) {
  const char* id = "chart-phases";
  if (plan_only(run)) return missing(id, kPlanOnly);
  const std::vector<PhaseBar> bars = phase_bars(run);
  if (bars.empty()) {
    if (run.kind == "memory")
      return missing(id, "No step phases in this JSON; <code>saturate probe</code> and <code>saturate search</code> "
                         "time them (the monitor is on unless <code>--no-monitor</code>).");
    return missing(id, "No step phases (<code>phases_ms</code>) in this JSON: the run had <code>--no-monitor</code>; "
                       "run it without that flag to time them.");
  }
  std::vector<std::string> names;
  double ymax = 0;
  for (const PhaseBar& b : bars) {
    names.push_back(b.label);
    double sum = 0;
    for (const auto& [n, v] : b.phases) sum += v;
    ymax = std::max({ymax, sum, b.step_ms.value_or(0)});
  }
  const bool search = run.kind == "search";
  SvgChart c(id, "Time per step by phase", category_axis(search ? "batch size (samples per step)" : "", names),
             linear_axis("time per step (ms)", 0, ymax * 1.1, true));
  std::vector<std::string> seen;
  for (size_t i = 0; i < bars.size(); ++i) {
    const PhaseBar& b = bars[i];
    double y0 = 0;
    for (const auto& [name, v] : b.phases) {
      std::string cls = name;
      std::replace(cls.begin(), cls.end(), '_', '-');
      c.bar(static_cast<int>(i), y0, y0 + v, "segment phase-" + cls,
            {{"data-x", b.data_x}, {"data-phase", name}, {"data-y", number_text(v)}, {"data-y0", number_text(y0)},
             {"data-slot", std::to_string(i)}, {"data-source", b.source}},
            fmt::format("{}: {} {:.3f} ms per step", b.label, name, v), 0.55);
      y0 += v;
      if (v > 0 && std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
    }
    // the step time the phases do not cover
    if (b.step_ms && *b.step_ms > y0 * 1.005) {
      c.bar(static_cast<int>(i), y0, *b.step_ms, "segment phase-unattributed",
            {{"data-x", b.data_x}, {"data-phase", "unattributed"}, {"data-y", number_text(*b.step_ms - y0)},
             {"data-y0", number_text(y0)}, {"data-slot", std::to_string(i)}, {"data-derived", "step_time_ms - phases"}},
            fmt::format("{}: {:.3f} ms of the step in no phase", b.label, *b.step_ms - y0), 0.55);
      if (std::find(seen.begin(), seen.end(), "unattributed") == seen.end()) seen.push_back("unattributed");
      y0 = *b.step_ms;
    }
    c.label(c.x_px(static_cast<double>(i)), c.y_px(y0) - 6, fmt::format("{:.1f} ms", y0));
  }
  for (const std::string& name : phase_order())
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      std::string cls = name;
      std::replace(cls.begin(), cls.end(), '_', '-');
      c.legend(name == "h2d" ? "host to device" : name == "data_wait" ? "data wait" : name, "box", "phase-" + cls);
    }
  for (const std::string& name : seen)
    if (std::find(phase_order().begin(), phase_order().end(), name) == phase_order().end()) {
      std::string cls = name;
      std::replace(cls.begin(), cls.end(), '_', '-');
      c.legend(name == "unattributed" ? "in no phase" : name, "box", "phase-" + cls);
    }
  return c.svg();
}

// ---------------------------------------------------------------------------------------------
// 5. utilization of the trials in the order they ran

struct UtilSeries {
  const char* key;
  const char* name;
  const char* cls;
};

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

// ---------------------------------------------------------------------------------------------
// train: the loss per step

std::string loss_chart(const Run& run) {
  const char* id = "chart-loss";
  if (!run.j.contains("losses") || !run.j["losses"].is_array() || run.j["losses"].empty())
    return missing(id, "No losses in this JSON.");
  const json& losses = run.j["losses"];
  const size_t n = losses.size();
  const size_t per = (n + 999) / 1000;  // at most 1000 vertices: each the mean of `per` steps
  std::vector<std::pair<double, double>> line;
  double lo = 0, hi = 0;
  for (size_t i = 0; i < n; i += per) {
    double sum = 0;
    size_t k = 0;
    for (size_t s = i; s < std::min(n, i + per); ++s) {
      if (!losses[s].is_number()) continue;  // a skipped (non-finite) step
      sum += losses[s].get<double>();
      ++k;
    }
    if (k == 0) continue;
    const double y = sum / static_cast<double>(k);
    const double x = static_cast<double>(i) + (static_cast<double>(std::min(n, i + per) - i) + 1) / 2.0;
    lo = line.empty() ? y : std::min(lo, y);
    hi = line.empty() ? y : std::max(hi, y);
    line.push_back({x, y});
  }
  if (line.empty()) return missing(id, "No finite loss in this JSON.");
  SvgChart c(id, "Training loss per step", linear_axis("optimizer step", 0, static_cast<double>(n), true),
             linear_axis("training loss", lo, hi, lo >= 0 && lo < 0.25 * hi));
  c.polyline(line, "loss", {{"data-steps-per-vertex", std::to_string(per)}, {"data-count", std::to_string(n)}});
  c.legend(per > 1 ? fmt::format("loss, mean of each {} steps", per) : std::string("loss of each step"), "line", "loss");
  return c.svg();
}

// ---------------------------------------------------------------------------------------------
// the decision in words

std::string li(const std::string& html) { return "<li>" + html + "</li>\n"; }

std::string bottleneck_words(const json* b, const std::string& at) {
  if (!b) return "";
  const std::string verdict = opt_string(*b, "verdict");
  if (verdict.empty()) return "";
  std::string s = fmt::format("<b>Bottleneck{}: {}</b> — {}.", at, esc(verdict), esc(opt_string(*b, "reason")));
  const std::string fix = opt_string(*b, "fix");
  if (!fix.empty()) s += " <b>What to change:</b> " + esc(fix) + ".";
  return li(s);
}

/// Advice from where the memory goes, when one part dominates.
std::string memory_words(const Run& run) {
  std::string where;
  const json* b = find_breakdown(run, &where);
  if (!b) return "";
  const auto peak = opt_number(*b, "peak_allocated_bytes", where);
  if (!peak || *peak <= 0) return "";
  std::string top_name;
  double top = -1;
  for (const Part& p : breakdown_parts())
    if (const auto v = opt_number(*b, p.key, where); v && *v > top) {
      top = *v;
      top_name = p.name;
    }
  std::string s = fmt::format("<b>Memory at the peak:</b> {} is the largest part, {} ({} of {}).", esc(top_name),
                              bytes(top), percent(top, *peak), bytes(*peak));
  const double act = opt_number(*b, "activations_bytes", where).value_or(0);
  const double opt = opt_number(*b, "optimizer_state_bytes", where).value_or(0);
  const std::string precision = opt_string(run.j, "precision");
  std::string ckpt = opt_string(run.j, "checkpointing");
  if (const json* cj = opt_object(run.j, "checkpointing")) ckpt = opt_string(*cj, "choice");
  if (act / *peak > 0.5) {
    std::vector<std::string> fixes;
    if (ckpt.empty() || ckpt == "none") fixes.push_back("activation checkpointing (<code>--checkpointing auto</code>)");
    if (precision.empty() || precision == "fp32" || precision == "tf32")
      fixes.push_back("mixed precision (<code>--precision bf16</code>)");
    if (!fixes.empty())
      s += fmt::format(" Activations grow with the batch: {} would make room for a larger one.",
                       fmt::format("{}{}{}", fixes[0], fixes.size() > 1 ? " or " : "", fixes.size() > 1 ? fixes[1] : ""));
  } else if (opt / *peak > 0.3 && opt_string(run.j, "optimizer") != "sgd") {
    s += " Adam and AdamW keep two state tensors per parameter; <code>--optimizer sgd</code> keeps none (with momentum: one).";
  }
  return li(s);
}

std::string compute_words(const json& c) {
  const auto mfu = opt_number(c, "mfu", "compute");
  const auto achieved = opt_number(c, "achieved_flops_per_s", "compute");
  const auto peak = opt_number(c, "peak_flops_per_s", "compute");
  if (!mfu || !achieved) return "";
  std::string s = fmt::format("<b>Compute:</b> {}/s = {:.1f} % MFU", format_flops(*achieved), 100.0 * *mfu);
  if (peak) s += fmt::format(" of {}/s ({})", format_flops(*peak), esc(opt_string(c, "peak_method")));
  const auto batch = opt_number(c, "batch", "compute");
  if (batch) s += " at batch " + number_text(*batch);
  return li(s + ".");
}

/// --plan-for: the prediction for another device.
std::string plan_words(const json& j) {
  const json* p = opt_object(j, "plan");
  if (!p) return "";
  const auto max = opt_number(*p, "max_batch", "plan"), rec = opt_number(*p, "recommended_batch", "plan");
  const auto capacity = opt_number(*p, "capacity_bytes", "plan");
  const auto peak = opt_number(*p, "predicted_peak_bytes", "plan"), target = opt_number(*p, "target_bytes", "plan");
  std::string s = fmt::format("<b>Prediction for {}</b>", esc(opt_string(*p, "target")));
  if (capacity) s += " (" + bytes(*capacity) + ")";
  s += ":";
  if (rec) s += fmt::format(" recommended_batch {}", number_text(*rec));
  if (peak) s += " (predicted peak " + bytes(*peak) + (target ? " within the target " + bytes(*target) : "") + ")";
  if (max) s += fmt::format(", max_batch {}", number_text(*max));
  s += ". A prediction from this device's run, not a measurement there";
  const std::string method = opt_string(*p, "method");
  return li(s + (method.empty() ? "." : ": " + esc(method) + "."));
}

std::string search_decision(const Run& run) {
  const json& j = run.j;
  const auto rec = opt_number(j, "recommended_batch", "");
  const auto max = opt_number(j, "max_batch", "");
  const auto tb = opt_number(j, "throughput_batch", "");
  std::string lead, items;
  const std::string error = opt_string(j, "error");
  if (run.trials.empty() && opt_object(j, "plan")) {
    const auto rec_there = opt_number(j["plan"], "recommended_batch", "plan");
    lead = fmt::format("Predicted for {}: batch <b>{}</b> (<code>--plan-only</code>: nothing measured here)",
                       esc(opt_string(j["plan"], "target")), rec_there ? number_text(*rec_there) : "-");
    return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + plan_words(j) + "</ul>\n";
  }
  if (!rec || *rec <= 0) {
    lead = "No batch fits: " + (error.empty() ? std::string("no trial ran under the budget.") : esc(error));
    return "<p class=\"lead\">" + lead + "</p>\n<ul>\n" + plan_words(j) + "</ul>\n";
  }
  lead = fmt::format("Train at batch <b>{}</b>", number_text(*rec));
  const TrialView* rt = run.recommended();
  const double pct_target = run.budget && run.target && *run.budget > 0 ? 100.0 * *run.target / *run.budget : 0;
  {
    std::string s = fmt::format("<b>recommended_batch {}</b>: the largest batch whose measured peak", number_text(*rec));
    if (rt && rt->peak_reserved) s += " (" + bytes(*rt->peak_reserved) + ")";
    s += " stays within the target";
    if (run.target && run.budget)
      s += fmt::format(", {:.0f} % of the {} budget = {}", pct_target, bytes(*run.budget), bytes(*run.target));
    s += j.value("recommended_exact", false) ? fmt::format("; exact: batch {} went over it.", number_text(*rec + 1))
                                             : ".";
    s += " The margin absorbs memory that varies between steps and runs (fragmentation, data of varying size).";
    items += li(s);
  }
  if (max && *max > 0) {
    std::string s = fmt::format("<b>max_batch {}</b>: the largest batch that fits the budget at all", number_text(*max));
    if (j.value("capped", false))
      s += " (capped by <code>--max-batch</code>)";
    else if (j.value("max_batch_exact", false))
      s += fmt::format(" (exact: {} ran out of memory)", number_text(*max + 1));
    else
      s += " (not exact: the strategy stops at a power of two)";
    for (const TrialView& t : run.trials)
      if (t.ok() && t.batch == *max && t.peak_reserved && run.budget) {
        s += fmt::format("; it leaves {} of the budget free", bytes(*run.budget - *t.peak_reserved));
        break;
      }
    items += li(s + ".");
  }
  if (const json* bd = opt_object(j, "boundary")) {
    const bool confirmed = bd->value("confirmed", false);
    items += li(confirmed ? fmt::format("<b>Boundary confirmed</b> by {} re-probe(s).",
                                        number_text(opt_number(*bd, "confirm_runs", "boundary").value_or(0)))
                          : fmt::format("<b>The boundary moves</b> between runs by {} batch(es); max_batch is the "
                                        "largest that fit every time.",
                                        number_text(opt_number(*bd, "spread", "boundary").value_or(0))));
  }
  if (tb && *tb > 0) {
    double best = 0, best_batch = 0;
    for (const TrialView& t : run.trials)
      if (t.ok() && t.samples_per_s && *t.samples_per_s > best) {
        best = *t.samples_per_s;
        best_batch = t.batch;
      }
    std::string s = fmt::format("<b>throughput_batch {}</b>: the smallest measured batch within 3 % of the best "
                                "samples/s ({:.1f} at batch {}).",
                                number_text(*tb), best, number_text(best_batch));
    if (*tb < *rec) {
      s += fmt::format(" Batches above {} add memory, not speed: train at {} unless the optimization needs the "
                       "larger batch (then scale the learning rate with it).",
                       number_text(*tb), number_text(*tb));
      lead += fmt::format(" — or at <b>{}</b>, which is as fast", number_text(*tb));
    } else {
      s += " Throughput still grows up to the recommended batch: memory is what limits it.";
    }
    items += li(s);
  }
  if (const json* o = opt_object(j, "objective")) {
    const std::string reason = opt_string(*o, "reason");
    if (!reason.empty())
      items += li(fmt::format("<b>Objective {}</b>: {} (batch {}).", esc(opt_string(*o, "objective")), esc(reason),
                              number_text(opt_number(*o, "batch", "objective").value_or(0))));
  }
  if (const json* law = opt_object(j, "memory_model"); law && law->value("valid", false))
    items += li(fmt::format("<b>Memory law</b>: {} fixed + {} per sample, fitted to the trials and verified at the "
                            "boundary.",
                            bytes(opt_number(*law, "fixed_bytes", "memory_model").value_or(0)),
                            bytes(opt_number(*law, "per_sample_bytes", "memory_model").value_or(0))));
  items += bottleneck_words(rt && rt->j->contains("bottleneck") ? &(*rt->j)["bottleneck"] : nullptr,
                            rt ? " at batch " + number_text(rt->batch) : "");
  items += memory_words(run);
  if (const json* cj = opt_object(j, "checkpointing")) {
    const std::string reason = opt_string(*cj, "reason");
    if (!reason.empty())
      items += li(fmt::format("<b>Checkpointing {}</b> ({}): {}.", esc(opt_string(*cj, "choice")),
                              esc(opt_string(*cj, "policy")), esc(reason)));
  }
  if (const json* fj = opt_object(j, "fast_paths")) {
    const std::string chosen = opt_string(*fj, "chosen");
    const std::string reason = opt_string(*fj, "reason");
    if (!chosen.empty())
      items += li(fmt::format("<b>Fast paths:</b> {}{}.", esc(chosen), reason.empty() ? "" : " — " + esc(reason)));
  }
  if (const json* cj = opt_object(j, "compute")) items += compute_words(*cj);
  items += plan_words(j);
  if (!error.empty()) items += li("<b>Error:</b> " + esc(error));
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

std::string single_decision(const Run& run) {
  const TrialView& t = run.trials.front();
  std::string lead = fmt::format("Batch <b>{}</b>: {}", number_text(t.batch), esc(t.status));
  std::string items;
  if (t.peak_reserved) {
    lead += ", peak " + bytes(*t.peak_reserved);
    if (run.budget) lead += fmt::format(" of the {} budget ({})", bytes(*run.budget), percent(*t.peak_reserved, *run.budget));
  }
  if (t.ok() && t.samples_per_s)
    items += li(fmt::format("<b>Throughput:</b> {:.1f} samples/s, {:.2f} ms per step.", *t.samples_per_s,
                            t.step_time_ms.value_or(0)));
  const std::string error = opt_string(run.j, "error");
  if (!error.empty()) items += li("<b>Error:</b> " + esc(error));
  items += memory_words(run);
  // how far the budget reaches, from the parts that grow with the batch
  std::string where;
  if (const json* b = find_breakdown(run, &where); b && run.budget && t.ok() && t.batch > 0) {
    double growing = 0;
    for (const char* k : {"inputs_bytes", "activations_bytes", "workspace_bytes"})
      growing += opt_number(*b, k, where).value_or(0);
    const auto peak = opt_number(*b, "peak_reserved_bytes", where);
    if (peak && growing > 0) {
      const double per = growing / t.batch, fixed = *peak - growing;
      const double fit = std::floor((0.9 * *run.budget - fixed) / per);
      if (fit > 0)
        items += li(fmt::format("<b>Rough reach:</b> inputs, activations and workspace take {} per sample here; at that "
                                "rate about batch {} would fill 90 % of the budget. <code>saturate search</code> finds "
                                "the batch exactly.",
                                bytes(per), number_text(fit)));
    }
  }
  if (const json* leak = opt_object(run.j, "leak")) {
    const auto steps = opt_number(*leak, "steps", "leak");
    if (leak->value("detected", false))
      items += li(fmt::format("<b>Leak DETECTED:</b> +{} per step from step {} (over {} steps).",
                              bytes(opt_number(*leak, "bytes_per_step", "leak").value_or(0)),
                              number_text(opt_number(*leak, "first_step", "leak").value_or(0)),
                              number_text(steps.value_or(0))));
    else
      items += li(fmt::format("<b>No leak:</b> the memory allocated after each step stays flat over {} steps.",
                              number_text(steps.value_or(0))));
  }
  items += bottleneck_words(opt_object(run.j, "bottleneck"), "");
  if (const json* cj = opt_object(run.j, "compute")) items += compute_words(*cj);
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

std::string train_decision(const Run& run) {
  const json& j = run.j;
  const auto micro = opt_number(j, "micro_batch", ""), acc = opt_number(j, "accumulation", "");
  const auto global = opt_number(j, "global_batch", ""), world = opt_number(j, "world_size", "");
  const auto sps = opt_number(j, "samples_per_s", "");
  std::string lead = fmt::format("Trained at micro-batch <b>{}</b> x {} accumulation{} = global batch <b>{}</b>",
                                 number_text(micro.value_or(0)), number_text(acc.value_or(1)),
                                 world && *world > 1 ? fmt::format(" x {} ranks", number_text(*world)) : "",
                                 number_text(global.value_or(0) * std::max(1.0, world.value_or(1))));
  if (sps) lead += fmt::format(": {:.1f} samples/s", *sps);
  std::string items;
  {
    std::string s = fmt::format("<b>Ran</b> {} steps, {} samples ({:.2f} epochs)",
                                number_text(opt_number(j, "steps", "").value_or(0)),
                                number_text(opt_number(j, "samples_seen", "").value_or(0)),
                                opt_number(j, "epochs", "").value_or(0));
    if (const auto l = opt_number(j, "final_train_loss", "")) s += fmt::format("; final train loss {:.4f}", *l);
    for (const char* split : {"test", "val"}) {
      const auto acc_v = opt_number(j, fmt::format("final_{}_accuracy", split).c_str(), "");
      if (acc_v) s += fmt::format("; {} accuracy {:.2f} %", split, 100.0 * *acc_v);
    }
    items += li(s + ".");
  }
  if (j.contains("oom_backoffs") && j["oom_backoffs"].is_array()) {
    const size_t n = j["oom_backoffs"].size();
    items += li(n == 0 ? std::string("<b>No out-of-memory back-off</b>: the micro-batch fit throughout.")
                       : fmt::format("<b>{} out-of-memory back-off(s)</b>: the micro-batch was halved and the "
                                     "accumulation doubled; <code>--batch auto</code> searches a micro-batch that fits "
                                     "from the start.",
                                     n));
  }
  if (const json* in = opt_object(j, "interrupted"))
    items += li(fmt::format("<b>Interrupted</b> by {}.", esc(opt_string(*in, "signal"))));
  if (const json* o = opt_object(j, "objective")) {
    const std::string reason = opt_string(*o, "reason");
    if (!reason.empty()) items += li(fmt::format("<b>Objective {}</b>: {}.", esc(opt_string(*o, "objective")), esc(reason)));
  }
  items += bottleneck_words(opt_object(j, "bottleneck"), "");
  if (const auto mfu = opt_number(j, "mfu", ""); mfu && opt_number(j, "achieved_flops_per_s", ""))
    items += compute_words(j);
  if (const json* leak = opt_object(j, "leak"); leak && leak->value("detected", false))
    items += li(fmt::format("<b>Memory grows</b> by {} per step from step {}.",
                            bytes(opt_number(*leak, "bytes_per_step", "leak").value_or(0)),
                            number_text(opt_number(*leak, "first_step", "leak").value_or(0))));
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

// ---------------------------------------------------------------------------------------------
// the context block and the trial table

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
    rows.push_back({"ranks", number_text(*w) + " (" + esc(opt_string(j, "backend")) + ")"});
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
  // the build that measured: saturate's version and commit, build type, compiler, LibTorch and CUDA
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
  if (!versions.empty()) rows.push_back({b ? "build" : "versions", versions});
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
.chart circle.cpu { fill: #2563eb; stroke: #fff; } .chart circle.gpu { fill: #16a34a; stroke: #fff; }
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

std::string run_kind(const nlohmann::json& run) {
  if (!run.is_object())
    throw UsageError(fmt::format("not a saturate run: the JSON is {} {}, expected the object that saturate search, "
                                 "memory, probe or train writes with --json",
                                 run.is_array() ? "an" : "a", run.type_name()));
  if (run.contains("trials")) {
    if (!run["trials"].is_array())
      throw UsageError(fmt::format("'trials': expected an array of trials, got {}", run["trials"].type_name()));
    return "search";
  }
  const std::string command = opt_string(run, "command");  // written by newer builds
  if (run.contains("plan") && run["plan"].is_object() && (command.empty() || command == "search"))
    return "search";  // --plan-only: a prediction for another device, no trials here
  if (run.contains("global_batch") && run.contains("steps")) return "train";
  if (run.contains("batch") && run.contains("status") && run.contains("peak_reserved_bytes"))
    return command == "memory" || command == "probe" ? command
           : run.contains("timeline") || run.contains("leak") ? "memory"
                                                               : "probe";
  std::string keys;
  int n = 0;
  for (const auto& [k, v] : run.items()) {
    if (n++ == 8) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "'" : ", '") + k + "'";
  }
  throw UsageError(fmt::format(
      "not a saturate run: no 'trials' (saturate search --json), no 'global_batch' and 'steps' (saturate train "
      "--json), no 'batch', 'status' and 'peak_reserved_bytes' (saturate memory or probe --json); its keys are {}",
      keys.empty() ? "none" : keys));
}

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
  } else if (run.kind != "train") {
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
  html += section("utilization", "Utilization",
                  run.kind == "search" ? "Mean utilization sampled during each trial; the bar spans the samples' "
                                         "minimum to maximum."
                                       : "",
                  utilization_chart(run));
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

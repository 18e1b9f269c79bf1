// The charts of the HTML report but utilization (html_utilization.cpp): peak memory and
// throughput against the batch, the memory breakdown at the peak, the step phases, train's loss.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "html_run.h"

namespace saturate::html {

// ---------------------------------------------------------------------------------------------
// 1. peak memory against the batch

std::string peak_memory_chart(const Run& run) {
  const char* id = "chart-peak-memory";
  if (plan_only(run)) return missing(id, kPlanOnly);
  std::vector<const TrialView*> pts;
  for (const TrialView& t : run.trials)
    if (t.peak_reserved) pts.push_back(&t);
  if (pts.empty()) {
    if (run.kind == "train")
      return missing(id, "No peak memory per batch: this <code>saturate train</code> ran the micro-batch it was "
                         "given and searched none (<code>`micro_batch` auto</code> searches it, and this chart "
                         "draws the search); <code>saturate search `json` FILE</code> measures it too.");
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
      // a straight line, which the log batch axis bends: said, so it does not read as exponential
      c.legend(fmt::format("fitted law {} + {}/sample{}", bytes(fixed), bytes(per),
                           x.scale == AxisScale::kLog2 ? " (a straight line, curved by the log batch axis)" : ""),
               "line", "law");
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
                                   "<code>saturate search `json` FILE</code> measures samples/s across batches.",
                                   sps ? fmt::format("{:.1f}", *sps) : "-", gb ? number_text(*gb) : "-"));
  }
  if (run.kind != "search") {
    if (pts.empty()) return missing(id, "The measured batch did not run to the end: no samples/s.");
    return missing(id, fmt::format("One batch measured ({:.1f} samples/s at batch {}); "
                                   "<code>saturate search `json` FILE</code> measures samples/s across batches.",
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

std::string breakdown_chart(const Run& run) {
  const char* id = "chart-memory-breakdown";
  std::string where;
  const json* b = find_breakdown(run, &where);
  if (!b) {
    if (plan_only(run)) return missing(id, kPlanOnly);
    if (run.kind == "train")
      return missing(id, fmt::format("<code>saturate train</code> records no memory breakdown; "
                                     "<code>saturate memory `micro_batch` {} `json` FILE</code> does.",
                                     number_text(opt_number(run.j, "micro_batch", "").value_or(64))));
    return missing(id, "No <code>memory_breakdown</code> in this JSON; "
                       "<code>saturate memory `micro_batch` N `json` FILE</code> records one.");
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

namespace {

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

}  // namespace

std::string phases_chart(const Run& run) {
  const char* id = "chart-phases";
  if (plan_only(run)) return missing(id, kPlanOnly);
  const std::vector<PhaseBar> bars = phase_bars(run);
  if (bars.empty()) {
    if (run.kind == "memory")
      return missing(id, "No step phases in this JSON; <code>saturate probe</code> and <code>saturate search</code> "
                         "time them (the monitor is on unless <code>`no_monitor`</code>).");
    return missing(id, "No step phases (<code>phases_ms</code>) in this JSON: the run had <code>`no_monitor`</code>; "
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
// 5. train: the loss per step

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

}  // namespace saturate::html

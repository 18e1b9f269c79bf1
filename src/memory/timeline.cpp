#include "saturate/memory/timeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "memory/log_replay.h"
#include "saturate/core/errors.h"
#include "memory/snapshot.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"

namespace saturate {

Timeline build_timeline(const MemoryEventLog& log, int step, size_t top_n) {
  Timeline t;
  t.source = log.source;
  // the window: [begin, end) in events, with its start time.
  size_t begin = 0, end = log.events.size();
  int64_t t0 = log.start_time_ns, t1 = log.events.empty() ? t0 : log.events.back().time_ns;
  bool found = false;
  for (size_t m = log.marks.size(); m-- > 0 && !found;) {
    const PhaseMark& e = log.marks[m];
    if (e.begin || e.phase != "step" || (step >= 0 && e.step != step)) continue;
    for (size_t k = m; k-- > 0;) {
      const PhaseMark& b = log.marks[k];
      if (b.begin && b.phase == "step" && b.step == e.step) {
        begin = b.event_index;
        end = e.event_index;
        t0 = b.time_ns;
        t1 = e.time_ns;
        t.step = e.step;
        found = true;
        break;
      }
    }
  }
  if (!found && step >= 0)
    throw UsageError(fmt::format("timeline: step {} is not in the log (the run recorded fewer steps)", step));
  end = std::min(end, log.events.size());
  const detail::LogReplay r = detail::replay_log(log);
  t.start_bytes = begin > 0 && begin <= r.allocated_after.size() ? r.allocated_after[begin - 1] : log.start_allocated_bytes;
  const auto ms = [&](int64_t ns) { return static_cast<double>(ns - t0) / 1e6; };
  t.duration_ms = std::max(0.0, ms(t1));
  t.points.push_back({0.0, t.start_bytes});
  t.peak_allocated_bytes = t.start_bytes;
  size_t peak_index = begin > 0 ? begin - 1 : 0;
  bool peak_in_window = false;
  for (size_t i = begin; i < end; ++i) {
    const MemoryEvent& e = log.events[i];
    if (e.kind == MemoryEvent::kOom) {
      t.oom_ms.push_back(ms(e.time_ns));
      continue;
    }
    t.points.push_back({std::max(0.0, ms(e.time_ns)), r.allocated_after[i]});
    if (r.allocated_after[i] > t.peak_allocated_bytes) {
      t.peak_allocated_bytes = r.allocated_after[i];
      t.peak_ms = ms(e.time_ns);
      peak_index = i;
      peak_in_window = true;
    }
  }
  if (!found) t.duration_ms = t.points.back().time_ms;
  for (size_t m = 0; m < log.marks.size(); ++m) {
    const PhaseMark& b = log.marks[m];
    if (!b.begin || b.phase == "step" || (found && b.step != t.step)) continue;
    TimelinePhase p{b.phase, ms(b.time_ns), t.duration_ms};
    for (size_t k = m + 1; k < log.marks.size(); ++k)
      if (!log.marks[k].begin && log.marks[k].phase == b.phase && log.marks[k].step == b.step) {
        p.end_ms = ms(log.marks[k].time_ns);
        break;
      }
    if (p.end_ms < 0 || p.begin_ms > t.duration_ms) continue;
    t.phases.push_back(p);
  }
  // what the snapshot needs: the allocations live at the window's start, and its events
  const int64_t before_log = begin > 0 && begin <= r.baseline_after.size() ? r.baseline_after[begin - 1]
                                                                          : log.start_allocated_bytes;
  if (before_log > 0) t.live_at_start.emplace_back(0, before_log);
  for (size_t i = 0; i < begin && i < log.events.size(); ++i)
    if (log.events[i].kind == MemoryEvent::kAlloc && (r.freed_at[i] == detail::kNever || r.freed_at[i] >= begin))
      t.live_at_start.emplace_back(log.events[i].address, log.events[i].bytes);
  t.events.assign(log.events.begin() + static_cast<std::ptrdiff_t>(begin),
                  log.events.begin() + static_cast<std::ptrdiff_t>(end));
  t.start_time_ns = t0;
  if (peak_in_window) {
    t.peak_phase = r.region[peak_index].phase;
    std::vector<LiveAllocation> live = live_allocations(log, peak_index);
    std::sort(live.begin(), live.end(), [](const LiveAllocation& a, const LiveAllocation& b) { return a.bytes > b.bytes; });
    if (live.size() > top_n) live.resize(top_n);
    t.largest_at_peak = std::move(live);
  }
  return t;
}

nlohmann::json timeline_json(const Timeline& t) {
  nlohmann::json points = nlohmann::json::array(), phases = nlohmann::json::array(), largest = nlohmann::json::array();
  for (const TimelinePoint& p : t.points) points.push_back({p.time_ms, p.allocated_bytes});
  for (const TimelinePhase& p : t.phases) phases.push_back({{"phase", p.phase}, {"begin_ms", p.begin_ms}, {"end_ms", p.end_ms}});
  for (const LiveAllocation& a : t.largest_at_peak)
    largest.push_back({{"bytes", a.bytes}, {"part", a.part}, {"phase", a.phase}, {"step", a.step}});
  return {{"step", t.step},
          {"source", t.source},
          {"duration_ms", t.duration_ms},
          {"start_bytes", t.start_bytes},
          {"peak_allocated_bytes", t.peak_allocated_bytes},
          {"peak_ms", t.peak_ms},
          {"peak_phase", t.peak_phase},
          {"phases", phases},
          {"oom_ms", t.oom_ms},
          {"largest_at_peak", largest},
          {"points_format", "[time_ms, allocated_bytes]"},
          {"points", points}};
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string phase_colour(const std::string& phase) {
  if (phase == "forward") return "#cfe3f7";
  if (phase == "backward") return "#f9dcc4";
  if (phase == "optimizer") return "#d4efd0";
  if (phase == "data_wait" || phase == "inputs") return "#eeeeee";
  return "#f3e8f7";
}

}  // namespace

std::string timeline_svg(const Timeline& t, const std::string& title) {
  const double W = 900, H = 380, left = 70, right = 20, top = 40, bottom = 45;
  const double pw = W - left - right, ph = H - top - bottom;
  const double span_ms = std::max(t.duration_ms, 1e-6);
  int64_t lo = t.start_bytes, hi = t.peak_allocated_bytes;
  for (const TimelinePoint& p : t.points) lo = std::min(lo, p.allocated_bytes);
  lo = 0;
  if (hi <= lo) hi = lo + 1;
  const double mib = 1024.0 * 1024.0;
  const double ymax = static_cast<double>(hi) * 1.08;
  const auto X = [&](double ms) { return left + pw * std::clamp(ms / span_ms, 0.0, 1.0); };
  const auto Y = [&](int64_t b) { return top + ph * (1.0 - (static_cast<double>(b) - lo) / (ymax - lo)); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H, W, H);
  s += fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\">{}</text>\n", left, escape(title));
  for (const TimelinePhase& p : t.phases) {
    const double x0 = X(p.begin_ms), x1 = std::max(X(p.end_ms), x0 + 1);
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x0, top, x1 - x0, ph,
                     phase_colour(p.phase));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#555\">{}</text>\n", x0 + 3, top + 12, escape(p.phase));
  }
  // y ticks
  for (int i = 0; i <= 5; ++i) {
    const int64_t b = lo + static_cast<int64_t>((ymax - lo) * i / 5);
    const double y = Y(b);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, y, left + pw, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.1f}</text>\n", left - 5, y + 4, b / mib);
  }
  for (int i = 0; i <= 5; ++i) {
    const double ms = span_ms * i / 5, x = X(ms);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.1f}</text>\n", x, top + ph + 16, ms);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time in step {} (ms)</text>\n", left + pw / 2,
                   H - 8, t.step);
  s += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">allocated (MiB)</text>\n",
                   top + ph / 2, top + ph / 2);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", left, top, pw, ph);
  // the curve, as steps; many events are thinned to the extremes of each pixel column.
  std::string path;
  double last_x = -1, last_y = Y(t.start_bytes);
  const size_t n = t.points.size();
  for (size_t i = 0; i < n; ++i) {
    const double x = X(t.points[i].time_ms), y = Y(t.points[i].allocated_bytes);
    if (i == 0) {
      path += fmt::format("M{:.1f},{:.1f}", x, y);
    } else if (x - last_x >= 0.5 || i + 1 == n || std::abs(y - last_y) > 3) {
      path += fmt::format(" H{:.1f} V{:.1f}", x, y);
    } else {
      continue;
    }
    last_x = x;
    last_y = y;
  }
  path += fmt::format(" H{:.1f}", X(t.duration_ms));
  s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\"/>\n", path);
  const double px = X(t.peak_ms), py = Y(t.peak_allocated_bytes);
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#c0392b\"/>\n", px, py);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c0392b\" text-anchor=\"{}\">peak {} ({})</text>\n",
                   px + (px > left + pw * 0.7 ? -6 : 6), py - 6, px > left + pw * 0.7 ? "end" : "start",
                   escape(format_bytes(t.peak_allocated_bytes)), escape(t.peak_phase));
  for (double ms : t.oom_ms)
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#c0392b\" stroke-dasharray=\"4 3\"/>\n",
                     X(ms), top, X(ms), top + ph);
  s += "</svg>\n";
  return s;
}

void write_timeline(const Timeline& t, const std::string& path, const std::string& title) {
  const auto ends_in = [&](const std::string& ext) {
    return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  const std::string text = ends_in(".svg")      ? timeline_svg(t, title)
                           : ends_in(".pickle") ? memory_snapshot_pickle(t)
                                                : timeline_json(t).dump(1) + "\n";
  write_output_file(path, text, {"`timeline`", "step.svg"});
}

}  // namespace saturate

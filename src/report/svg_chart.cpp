#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace saturate {
namespace {

constexpr double kMarginLeft = 88, kMarginRight = 112, kMarginTop = 40, kMarginBottom = 58;

/// 1, 2 or 5 times a power of ten, near range / count.
double nice_step(double range, int count) {
  if (!(range > 0)) return 1;
  const double raw = range / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

std::string px(double v) { return fmt::format("{:.2f}", v); }

std::string attrs_text(const ChartAttrs& data) {
  std::string s;
  for (const auto& [k, v] : data) s += fmt::format(" {}=\"{}\"", k, html_escape(v));
  return s;
}

/// Rough width of a label at the chart's 12px sans-serif font (legend layout).
double text_width(const std::string& s) { return 6.3 * static_cast<double>(s.size()); }

}  // namespace

std::string to_string(AxisScale scale) {
  switch (scale) {
    case AxisScale::kLinear: return "linear";
    case AxisScale::kLog2: return "log2";
    case AxisScale::kCategory: return "category";
  }
  return "linear";
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number_text(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.0e15)
    return fmt::format("{}", static_cast<int64_t>(value));
  return fmt::format("{}", value);
}

ChartAxis linear_axis(std::string label, double lo, double hi, bool from_zero) {
  ChartAxis a;
  a.label = std::move(label);
  if (from_zero) lo = std::min(0.0, lo);
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::fabs(lo));
  const double step = nice_step(hi - lo, 5);
  a.min = from_zero ? lo : std::floor(lo / step) * step;
  a.max = std::ceil(hi / step - 1e-9) * step;
  if (a.max <= a.min) a.max = a.min + step;
  const int n = static_cast<int>(std::lround((a.max - a.min) / step));
  for (int i = 0; i <= n; ++i) {
    const double t = a.min + i * step;
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  }
  return a;
}

ChartAxis bytes_axis(std::string label, double hi) {
  ChartAxis a;
  a.label = std::move(label);
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int k = 0;
  double unit = 1;
  while (k < 4 && hi >= unit * 1024) {
    unit *= 1024;
    ++k;
  }
  const double step = nice_step(std::max(hi, 1.0) / unit, 5) * unit;
  a.min = 0;
  a.max = std::max(step, std::ceil(hi / step - 1e-9) * step);
  const int n = static_cast<int>(std::lround(a.max / step));
  for (int i = 0; i <= n; ++i) a.ticks.push_back(i * step);
  const std::string name = kUnits[k];
  a.tick_text = [unit, name](double v) { return v == 0 ? std::string("0") : fmt::format("{:g} {}", v / unit, name); };
  return a;
}

ChartAxis log2_axis(std::string label, double lo, double hi) {
  ChartAxis a;
  a.label = std::move(label);
  a.scale = AxisScale::kLog2;
  lo = std::max(lo, 1.0);
  hi = std::max(hi, lo);
  int e0 = static_cast<int>(std::floor(std::log2(lo)));
  int e1 = static_cast<int>(std::ceil(std::log2(hi)));
  if (e1 <= e0) e1 = e0 + 1;
  a.min = std::ldexp(1.0, e0);
  a.max = std::ldexp(1.0, e1);
  const int every = (e1 - e0) > 12 ? 2 : 1;
  for (int e = e0; e <= e1; e += every) a.ticks.push_back(std::ldexp(1.0, e));
  return a;
}

ChartAxis category_axis(std::string label, std::vector<std::string> names) {
  ChartAxis a;
  a.label = std::move(label);
  a.scale = AxisScale::kCategory;
  a.min = -0.5;
  a.max = static_cast<double>(names.size()) - 0.5;
  for (size_t i = 0; i < names.size(); ++i) a.ticks.push_back(static_cast<double>(i));
  a.categories = std::move(names);
  return a;
}

SvgChart::SvgChart(std::string id, std::string title, ChartAxis x, ChartAxis y, int width, int height)
    : id_(std::move(id)), title_(std::move(title)), x_(std::move(x)), y_(std::move(y)), width_(width),
      height_(height), left_(kMarginLeft), top_(kMarginTop), plot_w_(width - kMarginLeft - kMarginRight),
      plot_h_(height - kMarginTop - kMarginBottom) {}

double SvgChart::x_px(double x) const {
  double f;
  if (x_.scale == AxisScale::kLog2)
    f = (std::log2(x) - std::log2(x_.min)) / (std::log2(x_.max) - std::log2(x_.min));
  else
    f = (x - x_.min) / (x_.max - x_.min);
  return left_ + f * plot_w_;
}

double SvgChart::y_px(double y) const { return top_ + plot_h_ - (y - y_.min) / (y_.max - y_.min) * plot_h_; }

double SvgChart::slot_width_px() const { return plot_w_ / (x_.max - x_.min); }

void SvgChart::point(double x, double y, const std::string& data_x, const std::string& data_y, const std::string& cls,
                     const ChartAttrs& data, const std::string& tooltip, bool cross) {
  const double cx = x_px(x), cy = y_px(y);
  marks_ += fmt::format("<circle class=\"point {}\" data-x=\"{}\" data-y=\"{}\"{} cx=\"{}\" cy=\"{}\" r=\"{}\">"
                        "<title>{}</title></circle>\n",
                        html_escape(cls), html_escape(data_x), html_escape(data_y), attrs_text(data), px(cx), px(cy),
                        cross ? 6 : 4.5, html_escape(tooltip));
  if (cross)
    marks_ += fmt::format("<path class=\"cross\" aria-hidden=\"true\" d=\"M{} {}l7 7m0 -7l-7 7\"/>\n", px(cx - 3.5),
                          px(cy - 3.5));
}

void SvgChart::hline(double y, const std::string& data_y, const std::string& cls, const std::string& label,
                     const ChartAttrs& data) {
  const double py = y_px(y);
  overlay_ += fmt::format("<line class=\"{}\" data-y=\"{}\"{} x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", html_escape(cls),
                          html_escape(data_y), attrs_text(data), px(left_), px(py), px(left_ + plot_w_), px(py));
  if (!label.empty())
    overlay_ += fmt::format("<text class=\"line-label {}\" x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
                            html_escape(cls), px(left_ + plot_w_ + 6), px(py), html_escape(label));
}

void SvgChart::vline(double x, const std::string& data_x, const std::string& cls, const std::string& label,
                     const ChartAttrs& data) {
  const double p = x_px(x);
  overlay_ += fmt::format("<line class=\"{}\" data-x=\"{}\"{} x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", html_escape(cls),
                          html_escape(data_x), attrs_text(data), px(p), px(top_), px(p), px(top_ + plot_h_));
  if (label.empty()) return;
  const double half = 3.4 * static_cast<double>(label.size()) + 4;  // ~6.8 px a character at the label's size
  int row = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const LabelBox& b : vline_labels_)
      if (b.row == row && p - half < b.right && b.left < p + half) {
        ++row;
        moved = true;
      }
  }
  vline_labels_.push_back({p - half, p + half, row});
  overlay_ += fmt::format("<text class=\"line-label {}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                          html_escape(cls), px(p), px(top_ - 4 - 13.0 * row), html_escape(label));
}

void SvgChart::polyline(const std::vector<std::pair<double, double>>& xy, const std::string& cls,
                        const ChartAttrs& data) {
  std::string points;
  for (const auto& [x, y] : xy) points += fmt::format("{}{},{}", points.empty() ? "" : " ", px(x_px(x)), px(y_px(y)));
  marks_ += fmt::format("<polyline class=\"{}\"{} points=\"{}\"/>\n", html_escape(cls), attrs_text(data), points);
}

void SvgChart::vsegment(double x, double y0, double y1, const std::string& cls, const ChartAttrs& data) {
  const double p = x_px(x);
  marks_ += fmt::format("<line class=\"{}\"{} x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", html_escape(cls), attrs_text(data),
                        px(p), px(y_px(y0)), px(p), px(y_px(y1)));
}

void SvgChart::bar(int slot, double y0, double y1, const std::string& cls, const ChartAttrs& data,
                   const std::string& tooltip, double fraction) {
  const double w = std::min(slot_width_px() * fraction, 120.0);  // one bar alone stays a bar
  const double x = x_px(slot) - w / 2;
  const double top = y_px(std::max(y0, y1)), bottom = y_px(std::min(y0, y1));
  marks_ += fmt::format("<rect class=\"{}\"{} x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>\n",
                        html_escape(cls), attrs_text(data), px(x), px(top), px(w), px(bottom - top), html_escape(tooltip));
}

void SvgChart::label(double x, double y, const std::string& text, const std::string& anchor) {
  overlay_ += fmt::format("<text class=\"value-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", px(x), px(y),
                          anchor, html_escape(text));
}

void SvgChart::legend(const std::string& name, const std::string& swatch, const std::string& cls) {
  legend_.push_back({name, {swatch, cls}});
}

std::string SvgChart::svg() const {
  const auto tick_label = [](const ChartAxis& a, double v) {
    if (a.scale == AxisScale::kCategory) {
      const auto i = static_cast<size_t>(std::lround(v));
      return i < a.categories.size() ? a.categories[i] : std::string();
    }
    if (a.tick_text) return a.tick_text(v);
    return a.scale == AxisScale::kLog2 ? number_text(v) : fmt::format("{:g}", v);
  };
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" role=\"img\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" data-x-scale=\"{}\" data-x-min=\"{}\" data-x-max=\"{}\" data-y-scale=\"linear\" "
      "data-y-min=\"{}\" data-y-max=\"{}\" data-plot-left=\"{}\" data-plot-top=\"{}\" data-plot-width=\"{}\" "
      "data-plot-height=\"{}\">\n<title>{}</title>\n",
      html_escape(id_), width_, height_, width_, height_, to_string(x_.scale), number_text(x_.min), number_text(x_.max),
      number_text(y_.min), number_text(y_.max), number_text(left_), number_text(top_), number_text(plot_w_),
      number_text(plot_h_), html_escape(title_));
  // grid and ticks
  s += "<g class=\"axes\">\n";
  s += fmt::format("<rect class=\"plot-area\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", px(left_), px(top_),
                   px(plot_w_), px(plot_h_));
  for (double t : y_.ticks) {
    const double p = y_px(t);
    s += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", px(left_), px(p),
                     px(left_ + plot_w_), px(p));
    s += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n",
                     px(left_ - 6), px(p), html_escape(tick_label(y_, t)));
  }
  for (double t : x_.ticks) {
    const double p = x_px(t);
    if (x_.scale != AxisScale::kCategory)
      s += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", px(p), px(top_), px(p),
                       px(top_ + plot_h_));
    s += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(p),
                     px(top_ + plot_h_ + 18), html_escape(tick_label(x_, t)));
  }
  s += fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", px(left_), px(top_ + plot_h_),
                   px(left_ + plot_w_), px(top_ + plot_h_));
  s += fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", px(left_), px(top_), px(left_),
                   px(top_ + plot_h_));
  s += fmt::format("<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   px(left_ + plot_w_ / 2), px(height_ - 12), html_escape(x_.label));
  s += fmt::format("<text class=\"axis-label\" transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   px(top_ + plot_h_ / 2), html_escape(y_.label));
  s += "</g>\n<g class=\"marks\">\n" + marks_ + "</g>\n<g class=\"overlay\">\n" + overlay_ + "</g>\n";
  // the legend, in a row above the plot
  if (!legend_.empty()) {
    s += "<g class=\"legend\">\n";
    double x = left_;
    double y = 14;
    for (const auto& [name, kind] : legend_) {
      const auto& [swatch, cls] = kind;
      if (x > left_ && x + 20 + text_width(name) > left_ + plot_w_ + kMarginRight - 8) {  // a second row
        x = left_;
        y += 16;
      }
      if (swatch == "point")
        s += fmt::format("<circle class=\"swatch {}\" cx=\"{}\" cy=\"{}\" r=\"4.5\"/>", html_escape(cls), px(x + 7), px(y));
      else if (swatch == "cross")
        s += fmt::format("<circle class=\"swatch {}\" cx=\"{}\" cy=\"{}\" r=\"6\"/><path class=\"cross\" d=\"M{} {}l7 7m0 -7l-7 7\"/>",
                         html_escape(cls), px(x + 7), px(y), px(x + 3.5), px(y - 3.5));
      else if (swatch == "box")
        s += fmt::format("<rect class=\"swatch {}\" x=\"{}\" y=\"{}\" width=\"14\" height=\"12\"/>", html_escape(cls), px(x), px(y - 6));
      else
        s += fmt::format("<line class=\"swatch {}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>", html_escape(cls), px(x - 2), px(y), px(x + 16),
                         px(y));
      s += fmt::format("<text class=\"legend-text\" x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n", px(x + 20),
                       px(y), html_escape(name));
      x += 20 + text_width(name) + 18;
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace saturate

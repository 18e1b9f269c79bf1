// Implements: one inline-SVG chart for the HTML report (report/html_report.h): a plot box with a
// linear, log2 or category x axis and a linear y axis, ticks and their labels, axis titles with
// units, a legend, and the marks (points, lines, bars). No scripts, fonts or external files.
//
// Checkable by construction: each mark carries the value it draws as data-* attributes
// (data-x, data-y, ...), and the <svg> carries its mapping: data-x-scale (linear | log2 |
// category), data-x-min/max, data-y-min/max and the plot box in user units (data-plot-left,
// -top, -width, -height; the viewBox is the svg's size, so user units are pixels). A test
// turns cx/cy back into values through these and compares them with the run's JSON.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace saturate {

enum class AxisScale { kLinear, kLog2, kCategory };

/// "linear", "log2", "category" (the svg's data-x-scale).
std::string to_string(AxisScale scale);

struct ChartAxis {
  std::string label;  ///< with its unit, e.g. "batch size (samples per step)"
  AxisScale scale = AxisScale::kLinear;
  double min = 0, max = 1;         ///< the values at the plot box's edges
  std::vector<double> ticks;       ///< values with a grid line and a label
  std::function<std::string(double)> tick_text;  ///< a tick's label; default {:g}
  std::vector<std::string> categories;           ///< kCategory: one label per slot 0..n-1
};

/// A linear axis over [lo, hi] widened to round ticks (from 0 when `from_zero`).
ChartAxis linear_axis(std::string label, double lo, double hi, bool from_zero = true);
/// A linear axis of bytes from 0 to at least `hi`, ticks at round KiB/MiB/GiB values.
ChartAxis bytes_axis(std::string label, double hi);
/// A log2 axis from the power of two at or below `lo` to the one at or above `hi`.
ChartAxis log2_axis(std::string label, double lo, double hi);
/// One slot per name, slot i centred on value i (min -0.5, max n-0.5).
ChartAxis category_axis(std::string label, std::vector<std::string> names);

/// data-* attributes of a mark, in order; values are escaped when written.
using ChartAttrs = std::vector<std::pair<std::string, std::string>>;

class SvgChart {
 public:
  /// `id` the svg's id (chart-...), `title` its accessible title.
  SvgChart(std::string id, std::string title, ChartAxis x, ChartAxis y, int width = 960, int height = 380);

  /// A value's position in user units (x: a category's slot index for kCategory).
  double x_px(double x) const;
  double y_px(double y) const;
  double slot_width_px() const;  ///< kCategory: the width of one slot
  const ChartAxis& x_axis() const { return x_; }
  const ChartAxis& y_axis() const { return y_; }

  /// A circle of class "point <cls>" at (x, y) with data-x/data-y (given) plus `data`; `tooltip`
  /// becomes its <title>. `cross` adds an X over it (decoration, e.g. an out-of-memory trial).
  void point(double x, double y, const std::string& data_x, const std::string& data_y, const std::string& cls,
             const ChartAttrs& data, const std::string& tooltip, bool cross = false);
  /// A horizontal line across the plot at y (class `cls`, data-y given), labelled at its right end.
  void hline(double y, const std::string& data_y, const std::string& cls, const std::string& label,
             const ChartAttrs& data = {});
  /// A vertical line across the plot at x (class `cls`, data-x given), labelled at its top.
  void vline(double x, const std::string& data_x, const std::string& cls, const std::string& label,
             const ChartAttrs& data = {});
  /// A polyline through (x, y) values (class `cls`).
  void polyline(const std::vector<std::pair<double, double>>& xy, const std::string& cls, const ChartAttrs& data = {});
  /// A vertical segment from y0 to y1 at x (class `cls`), e.g. a min-max range.
  void vsegment(double x, double y0, double y1, const std::string& cls, const ChartAttrs& data = {});
  /// A bar in category slot `slot` from y0 up to y1 (class "<cls>"), `fraction` of the slot wide.
  void bar(int slot, double y0, double y1, const std::string& cls, const ChartAttrs& data, const std::string& tooltip,
           double fraction = 0.6);
  /// A text label above (x, y) in user units (class "value-label").
  void label(double x_px, double y_px, const std::string& text, const std::string& anchor = "middle");
  /// A legend entry: `swatch` is "point", "cross", "line" or "box", drawn with class `cls`.
  void legend(const std::string& name, const std::string& swatch, const std::string& cls);

  /// The whole <svg> element.
  std::string svg() const;

 private:
  std::string id_, title_;
  ChartAxis x_, y_;
  int width_, height_;
  double left_, top_, plot_w_, plot_h_;
  std::string marks_, overlay_;
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> legend_;
  /// The vertical lines' labels placed so far: left and right edge (px) and row above the plot;
  /// a label that would overlap one goes a row higher (issue 44: recommended and throughput
  /// labels overlapped).
  struct LabelBox {
    double left, right;
    int row;
  };
  std::vector<LabelBox> vline_labels_;
};

/// HTML/XML text with &, <, >, " and ' escaped (safe in text and in quoted attributes).
std::string html_escape(const std::string& text);

/// A number as JSON would write it back: integers without a decimal point, others in the
/// shortest form that reads back the same double.
std::string number_text(double value);

}  // namespace saturate

// The HTML report on hand-written runs: each mark sits where its JSON value maps through the
// chart's own axis attributes, out-of-memory and over-target trials are marked apart, text is
// escaped, a chart without data is a sentence, and a JSON that is not a run is refused by name.
// (tests/report/check_html_report.py renders real runs' reports in headless Chromium.)
#include "saturate/report/html_report.h"

#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;
using nlohmann::json;

namespace {

using Attrs = std::map<std::string, std::string>;

/// The <svg id=ID ...>...</svg> element of `html` ("" when absent).
std::string svg_of(const std::string& html, const std::string& id) {
  const size_t at = html.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) + 6 - at);
}

Attrs attrs_of(const std::string& tag) {
  Attrs a;
  static const std::regex kAttr(R"re(([a-zA-Z0-9_-]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(tag.begin(), tag.end(), kAttr); it != std::sregex_iterator(); ++it)
    a[(*it)[1]] = (*it)[2];
  return a;
}

/// The opening tags `<NAME ...>` in `svg` whose class list holds `cls`.
std::vector<Attrs> marks(const std::string& svg, const std::string& name, const std::string& cls) {
  std::vector<Attrs> out;
  const std::regex tag("<" + name + R"re(\s[^>]*>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator(); ++it) {
    Attrs a = attrs_of(it->str());
    const std::string classes = " " + a["class"] + " ";
    if (classes.find(" " + cls + " ") != std::string::npos) out.push_back(a);
  }
  return out;
}

/// A chart's mapping from its <svg> attributes, to turn positions back into values.
struct Mapping {
  std::string x_scale;
  double x_min, x_max, y_min, y_max, left, top, width, height;
  explicit Mapping(const std::string& svg) {
    Attrs a = attrs_of(svg.substr(0, svg.find('>')));
    x_scale = a["data-x-scale"];
    x_min = std::stod(a["data-x-min"]);
    x_max = std::stod(a["data-x-max"]);
    y_min = std::stod(a["data-y-min"]);
    y_max = std::stod(a["data-y-max"]);
    left = std::stod(a["data-plot-left"]);
    top = std::stod(a["data-plot-top"]);
    width = std::stod(a["data-plot-width"]);
    height = std::stod(a["data-plot-height"]);
  }
  double x(double px) const {
    const double f = (px - left) / width;
    if (x_scale == "log2") return std::exp2(std::log2(x_min) + f * (std::log2(x_max) - std::log2(x_min)));
    return x_min + f * (x_max - x_min);
  }
  double y(double px) const { return y_min + (top + height - px) / height * (y_max - y_min); }
  /// A value's tolerance on each axis: what one pixel spans (positions are written to 0.01 px).
  double y_pixel() const { return (y_max - y_min) / height; }
  double x_pixel_at(double v) const {
    return x_scale == "log2" ? v * (std::exp2((std::log2(x_max) - std::log2(x_min)) / width) - 1)
                             : (x_max - x_min) / width;
  }
};

double num(const Attrs& a, const std::string& key) { return std::stod(a.at(key)); }

json trial(int64_t batch, const std::string& status, int64_t peak, double sps) {
  return {{"batch", batch},
          {"status", status},
          {"peak_reserved_bytes", peak},
          {"peak_allocated_bytes", peak},
          {"samples_per_s", sps},
          {"step_time_ms", sps > 0 ? 1000.0 * static_cast<double>(batch) / sps : 0.0}};
}

/// A search over 2..513 under a 512 MiB budget: 1 MiB + 1 MiB per sample, 513 runs out.
json search_run() {
  constexpr int64_t kMiB = 1 << 20;
  json trials = json::array();
  for (int64_t b : {2, 16, 128, 460, 511})
    trials.push_back(trial(b, "ok", kMiB + b * kMiB, 1000.0 * std::min<double>(b, 128) / (1 + 0.001 * b)));
  trials.push_back(trial(513, "oom", 514 * kMiB, 0));
  trials.push_back(trial(461, "over-target", 462 * kMiB, 0));
  trials[6]["error"] = "over the target";
  trials[5]["error"] = "CPU budget exceeded";
  return {{"device", "cpu"},
          {"device_info", "cpu (2 threads)"},
          {"model", {{"name", "mlp"}, {"parameters", 1000}, {"input", "784"}}},
          {"optimizer", "adam"},
          {"budget_bytes", 512 * kMiB},
          {"target_bytes", 461 * kMiB},
          {"strategy", "fit"},
          {"trials", trials},
          {"max_batch", 511},
          {"max_batch_exact", true},
          {"recommended_batch", 460},
          {"recommended_exact", true},
          {"throughput_batch", 128},
          {"memory_model", {{"fixed_bytes", kMiB}, {"per_sample_bytes", kMiB}, {"valid", true}}},
          {"saturate_version", "0.1.0"},
          {"libtorch_version", "2.11.0"}};
}

}  // namespace

TEST(HtmlReportTest, AJsonWithoutTrialsIsRefusedNamingTheMissingKey) {
  ASSERT_THROWS_WITH(render_html_report(json{{"model", "mlp"}, {"max_batch", 3}}), UsageError, "no 'trials'");
  ASSERT_THROWS_WITH(render_html_report(json::array()), UsageError, "not a saturate run");
  ASSERT_THROWS_WITH(render_html_report(json{{"trials", 3}}), UsageError, "'trials': expected an array");
}

TEST(HtmlReportTest, ATrialWithoutABatchOrWithAWrongTypeIsRefusedNamingIt) {
  json run = search_run();
  run["trials"][1].erase("batch");
  ASSERT_THROWS_WITH(render_html_report(run), UsageError, "trials[1]: no 'batch'");
  run = search_run();
  run["trials"][2]["peak_reserved_bytes"] = "lots";
  ASSERT_THROWS_WITH(render_html_report(run), UsageError, "trials[2].peak_reserved_bytes: expected a number, got string");
}

TEST(HtmlReportTest, EveryTrialIsAPointAtItsBatchAndPeak) {
  const json run = search_run();
  const std::string svg = svg_of(render_html_report(run), "chart-peak-memory");
  ASSERT_FALSE(svg.empty());
  const Mapping m(svg);
  EXPECT_EQ(m.x_scale, "log2");  // 2..513 spans far more than 8x
  const auto points = marks(svg, "circle", "point");
  ASSERT_EQ(points.size(), run["trials"].size());
  for (const Attrs& p : points) {
    const json& t = run["trials"][std::stoi(p.at("data-trial"))];
    EXPECT_EQ(num(p, "data-x"), t["batch"].get<double>());
    EXPECT_EQ(num(p, "data-y"), t["peak_reserved_bytes"].get<double>());
    EXPECT_NEAR(m.x(num(p, "cx")), t["batch"].get<double>(), m.x_pixel_at(t["batch"].get<double>()));
    EXPECT_NEAR(m.y(num(p, "cy")), t["peak_reserved_bytes"].get<double>(), m.y_pixel());
  }
}

TEST(HtmlReportTest, OutOfMemoryAndOverTargetTrialsAreMarkedApart) {
  const std::string svg = svg_of(render_html_report(search_run()), "chart-peak-memory");
  std::map<std::string, std::vector<std::string>> batches_by_status;
  for (const Attrs& p : marks(svg, "circle", "point")) {
    const std::string cls = p.at("class");
    batches_by_status[cls.substr(cls.find(' ') + 1)].push_back(p.at("data-x"));
  }
  EXPECT_EQ(batches_by_status["oom"], std::vector<std::string>{"513"});
  EXPECT_EQ(batches_by_status["over-target"], std::vector<std::string>{"461"});
  EXPECT_EQ(batches_by_status["ok"].size(), 5u);
  EXPECT_EQ(marks(svg, "path", "cross").size(), 2u);  // over the out-of-memory mark and its legend swatch
  EXPECT_NE(svg.find("out of memory"), std::string::npos);  // the legend names the marks
  EXPECT_NE(svg.find("over the target"), std::string::npos);
}

TEST(HtmlReportTest, TheBudgetTargetAndLawLinesSitAtTheirValues) {
  const json run = search_run();
  const std::string svg = svg_of(render_html_report(run), "chart-peak-memory");
  const Mapping m(svg);
  for (const char* line : {"budget", "target"}) {
    const auto l = marks(svg, "line", line);
    ASSERT_FALSE(l.empty()) << line;
    const double want = run[std::string(line) + "_bytes"].get<double>();
    EXPECT_EQ(num(l[0], "data-y"), want);
    EXPECT_NEAR(m.y(num(l[0], "y1")), want, m.y_pixel());
  }
  const auto law = marks(svg, "polyline", "law");
  ASSERT_EQ(law.size(), 1u);
  std::istringstream points(law[0].at("points"));
  std::string xy;
  int n = 0;
  while (points >> xy) {
    const double x = m.x(std::stod(xy.substr(0, xy.find(',')))), y = m.y(std::stod(xy.substr(xy.find(',') + 1)));
    EXPECT_NEAR(y, (1 << 20) + x * (1 << 20), 2 * m.y_pixel()) << xy;
    EXPECT_LE(y, m.y_max + m.y_pixel());  // clipped to the plot
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(HtmlReportTest, ThroughputPointsAreTheTrialsThatRan) {
  const json run = search_run();
  const std::string svg = svg_of(render_html_report(run), "chart-throughput");
  const Mapping m(svg);
  const auto points = marks(svg, "circle", "point");
  ASSERT_EQ(points.size(), 5u);
  for (const Attrs& p : points) {
    const json& t = run["trials"][std::stoi(p.at("data-trial"))];
    EXPECT_EQ(t["status"], "ok");
    EXPECT_NEAR(m.y(num(p, "cy")), t["samples_per_s"].get<double>(), m.y_pixel());
    EXPECT_NEAR(m.x(num(p, "cx")), t["batch"].get<double>(), m.x_pixel_at(t["batch"].get<double>()));
  }
  EXPECT_EQ(marks(svg, "line", "recommended").at(0).at("data-x"), "460");
  EXPECT_EQ(marks(svg, "line", "throughput").at(0).at("data-x"), "128");
}

TEST(HtmlReportTest, BreakdownBarsAndPhaseSegmentsStandOnTheirValues) {
  json run = search_run();
  run["memory_breakdown"] = {{"parameters_bytes", 4000},      {"gradients_bytes", 4000},
                             {"optimizer_state_bytes", 8000}, {"activations_bytes", 300000},
                             {"peak_allocated_bytes", 316000}, {"batch", 460}};
  run["trials"][0]["phases_ms"] = {{"forward", 1.5}, {"backward", 3.0}, {"optimizer", 0.5}, {"data_wait", 0.25}};
  run["trials"][3]["phases_ms"] = {{"forward", 150.0}, {"backward", 300.0}, {"optimizer", 0.5}, {"data_wait", 0.0}};
  const std::string html = render_html_report(run);

  const std::string bd = svg_of(html, "chart-memory-breakdown");
  const Mapping mb(bd);
  const auto bars = marks(bd, "rect", "bar");
  ASSERT_EQ(bars.size(), 4u);
  for (const Attrs& b : bars) {
    const double want = run["memory_breakdown"][b.at("data-x")].get<double>();
    EXPECT_NEAR(mb.y(num(b, "y")), want, mb.y_pixel()) << b.at("data-x");
    EXPECT_NEAR(mb.y(num(b, "y") + num(b, "height")), 0, mb.y_pixel()) << b.at("data-x");
  }
  EXPECT_EQ(num(marks(bd, "line", "peak").at(0), "data-y"), 316000);

  const std::string ph = svg_of(html, "chart-phases");
  const Mapping mp(ph);
  const auto segs = marks(ph, "rect", "segment");
  int from_json = 0;
  for (const Attrs& s : segs) {
    const double top = mp.y(num(s, "y")), bottom = mp.y(num(s, "y") + num(s, "height"));
    EXPECT_NEAR(top - bottom, num(s, "data-y"), mp.y_pixel());
    EXPECT_NEAR(bottom, num(s, "data-y0"), mp.y_pixel());
    if (s.at("data-phase") == "unattributed") continue;  // step time outside every phase
    const json& t = run["trials"][s.at("data-x") == "2" ? 0 : 3];
    EXPECT_EQ(num(s, "data-y"), t["phases_ms"][s.at("data-phase")].get<double>());
    ++from_json;
  }
  EXPECT_EQ(from_json, 8);
}

TEST(HtmlReportTest, MissingDataIsASentenceSayingWhatAddsIt) {
  const std::string html = render_html_report(search_run());  // no phases, utilization or breakdown
  for (const char* id : {"chart-phases", "chart-utilization", "chart-memory-breakdown"}) {
    EXPECT_EQ(svg_of(html, id), "") << id;
    EXPECT_NE(html.find(std::string("<p class=\"missing\" data-chart=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(html.find("`no_monitor`"), std::string::npos);
  // a train run has no peaks per batch: the sentence names the command that measures them
  const json train = {{"global_batch", 64}, {"micro_batch", 64}, {"accumulation", 1}, {"steps", 3},
                      {"losses", {2.0, 1.5, 1.25}}, {"phases_ms", {{"forward", 1.0}, {"backward", 2.0}}}};
  const std::string t = render_html_report(train);
  EXPECT_EQ(svg_of(t, "chart-peak-memory"), "");
  EXPECT_NE(t.find("saturate search `json` FILE</code> measures it"), std::string::npos);
  EXPECT_NE(svg_of(t, "chart-phases"), "");
  const std::string loss = svg_of(t, "chart-loss");
  ASSERT_NE(loss, "");
  const Mapping m(loss);
  std::istringstream points(marks(loss, "polyline", "loss").at(0).at("points"));
  std::string xy;
  for (double want : {2.0, 1.5, 1.25}) {
    ASSERT_TRUE(points >> xy);
    EXPECT_NEAR(m.y(std::stod(xy.substr(xy.find(',') + 1))), want, m.y_pixel());
  }
}

TEST(HtmlReportTest, UtilizationPointsFollowTheTrialsInTheOrderTheyRan) {
  json run = search_run();
  for (size_t i = 0; i < run["trials"].size(); ++i)
    run["trials"][i]["utilization"] = {{"cpu_percent", {{"mean", 50.0 + i}, {"min", 10.0}, {"max", 150.0}}}, {"samples", 4}};
  const std::string svg = svg_of(render_html_report(run), "chart-utilization");
  const Mapping m(svg);
  EXPECT_EQ(m.x_scale, "category");
  const auto points = marks(svg, "circle", "point");
  ASSERT_EQ(points.size(), run["trials"].size());
  for (const Attrs& p : points) {
    const double slot = m.x(num(p, "cx"));
    EXPECT_NEAR(slot, num(p, "data-x"), 0.01);
    EXPECT_NEAR(m.y(num(p, "cy")), 50.0 + slot, m.y_pixel());
  }
  EXPECT_GE(m.y_max, 150.0);  // the ranges fit
}

TEST(HtmlReportTest, TextFromTheJsonIsEscaped) {
  json run = search_run();
  run["model"]["name"] = "<script>alert(\"x\")</script> & 'co'";
  run["trials"][5]["error"] = "<b>boom</b>";
  const std::string html = render_html_report(run);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>boom"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;co&#39;"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;boom&lt;/b&gt;"), std::string::npos);
}

TEST(HtmlReportTest, ThePageFetchesNothing) {
  const std::string html = render_html_report(search_run());
  for (const char* s : {"<script", "<link", "<img", "src=", "href=", "url(", "@import", "http://", "https://"})
    EXPECT_EQ(html.find(s), std::string::npos) << s;
  EXPECT_NE(html.find("<section id=\"decision\">"), std::string::npos);
  EXPECT_NE(html.find("Train at batch <b>460</b>"), std::string::npos);
  EXPECT_EQ(html.find("or at <b>128</b>"), std::string::npos) << "one answer: the lead names one batch";
}

TEST(HtmlReportTest, TheLeadIsTheDecisionsBatchAndNamesTheObjectiveThatChoseIt) {
  json run = search_run();
  run["decision"] = {{"batch", 128},
                     {"objective", "goodput"},
                     {"requested", "goodput"},
                     {"reason", "batch 128: best goodput"},
                     {"alternatives", json::array({{{"name", "memory"}, {"batch", 460}, {"reason", "within the target"}}})}};
  const std::string html = render_html_report(run);
  EXPECT_NE(html.find("Train at batch <b>128</b> (objective goodput)"), std::string::npos);
  EXPECT_EQ(html.find("Train at batch <b>460</b>"), std::string::npos);
  EXPECT_NE(html.find("<b>Alternative memory</b>: batch 460"), std::string::npos);
  run["decision"]["objective"] = "throughput";
  run["decision"]["fallback"] = "goodput not measurable";
  EXPECT_NE(render_html_report(run).find("(objective throughput, asked for goodput)"), std::string::npos);
}

TEST(HtmlReportTest, AMemoryRunIsOneTrialWithItsTimelinePhases) {
  const json run = {{"batch", 64},
                    {"status", "ok"},
                    {"peak_reserved_bytes", 1 << 20},
                    {"budget_bytes", 4 << 20},
                    {"samples_per_s", 100.0},
                    {"step_time_ms", 640.0},
                    {"timeline",
                     {{"duration_ms", 10.0},
                      {"phases", {{{"phase", "forward"}, {"begin_ms", 0.0}, {"end_ms", 4.0}},
                                  {{"phase", "backward"}, {"begin_ms", 4.0}, {"end_ms", 9.5}}}}}},
                    {"leak", {{"detected", false}, {"steps", 5}}}};
  EXPECT_EQ(run_kind(run), "memory");
  const std::string html = render_html_report(run);
  EXPECT_EQ(marks(svg_of(html, "chart-peak-memory"), "circle", "point").size(), 1u);
  EXPECT_EQ(svg_of(html, "chart-throughput"), "");  // one batch: no curve
  const auto segs = marks(svg_of(html, "chart-phases"), "rect", "segment");
  ASSERT_EQ(segs.size(), 3u);  // forward, backward and the 0.5 ms in no phase
  EXPECT_EQ(num(segs[1], "data-y"), 5.5);
  EXPECT_NE(html.find("No leak"), std::string::npos);
}

TEST(HtmlReportTest, APlanOnlySearchIsAPredictionWithNoCharts) {
  const json run = {{"command", "search"},
                    {"device", "cpu"},
                    {"build", {{"version", "0.1.0"}, {"git_commit", "abc123"}, {"build_type", "Release"}}},
                    {"host", {{"name", "box"}, {"cpu", "EPYC"}, {"cpu_cores", 2}}},
                    {"plan", {{"target", "h100-80gb"}, {"recommended_batch", 9000}, {"max_batch", 10000}}}};
  EXPECT_EQ(run_kind(run), "search");
  const std::string html = render_html_report(run);
  EXPECT_NE(html.find("Predicted for h100-80gb: batch <b>9000</b>"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"missing\" data-chart=\"chart-peak-memory\">No trials: the run had <code>`plan_only`"),
            std::string::npos);
  EXPECT_EQ(html.find("class=\"chart\""), std::string::npos);
  EXPECT_NE(html.find("saturate 0.1.0 (abc123, Release)"), std::string::npos);  // the build that measured
  EXPECT_NE(html.find("box (EPYC, 2 cores)"), std::string::npos);
}

namespace {

/// A train run of `n` monitor windows: window i covers steps 10i..10i+9, starts at 1.5 i s
/// (the first 0.25 s long, the others 1.5 s), CPU at 90 + i %, GPU at 40 + 2i %, memory busy at
/// 20 %, and an RSS that is no percentage.
json train_run(int n) {
  json windows = json::array();
  for (int i = 0; i < n; ++i) {
    const double seconds = i == 0 ? 0.25 : 1.5;
    const double start = i == 0 ? 0.0 : 0.25 + 1.5 * (i - 1);
    windows.push_back({{"first_step", 10 * i},
                       {"last_step", 10 * i + 9},
                       {"timed_steps", i == 0 ? 9 : 10},
                       {"start_s", start},
                       {"seconds", seconds},
                       {"utilization",
                        {{"source", "nvml"},
                         {"samples", 4},
                         {"sample_hz", 10.0},
                         {"cpu_percent", {{"mean", 90.0 + i}, {"min", 80.0}, {"max", 300.0}}},
                         {"gpu_util_percent", {{"mean", 40.0 + 2 * i}, {"min", 0.0}, {"max", 100.0}}},
                         {"mem_util_percent", {{"mean", 20.0}, {"min", 10.0}, {"max", 30.0}}},
                         {"rss_bytes", {{"mean", 4.0e8}, {"min", 3.0e8}, {"max", 5.0e8}}}}},
                       {"verdict", "compute-bound"}});
  }
  return {{"global_batch", 64}, {"micro_batch", 64}, {"accumulation", 1}, {"steps", 10 * n},
          {"losses", {2.0, 1.5}}, {"utilization", windows.empty() ? json() : windows[0]["utilization"]},
          {"monitor_windows", windows}};
}

}  // namespace

TEST(HtmlReportTest, TrainUtilizationIsEachPercentageOfEachWindowAtItsTimeAndMean) {
  const json run = train_run(6);
  const std::string svg = svg_of(render_html_report(run), "chart-utilization");
  ASSERT_FALSE(svg.empty());
  const Mapping m(svg);
  EXPECT_EQ(m.x_scale, "linear");
  EXPECT_NE(svg.find("time since the run started (s)"), std::string::npos);  // the axis says what x is
  std::map<std::string, int> per_series;
  for (const Attrs& p : marks(svg, "circle", "point")) {
    const json& w = run["monitor_windows"][std::stoi(p.at("data-window"))];
    const std::string key = p.at("data-series");
    const double mid = w["start_s"].get<double>() + w["seconds"].get<double>() / 2;
    const double mean = w["utilization"][key]["mean"].get<double>();
    EXPECT_DOUBLE_EQ(num(p, "data-x"), mid) << key;
    EXPECT_EQ(num(p, "data-y"), mean) << key;
    EXPECT_EQ(num(p, "data-start-s"), w["start_s"].get<double>());
    EXPECT_EQ(num(p, "data-seconds"), w["seconds"].get<double>());
    EXPECT_EQ(num(p, "data-first-step"), w["first_step"].get<double>());
    EXPECT_EQ(num(p, "data-last-step"), w["last_step"].get<double>());
    EXPECT_NEAR(m.x(num(p, "cx")), mid, m.x_pixel_at(mid)) << key;
    EXPECT_NEAR(m.y(num(p, "cy")), mean, m.y_pixel()) << key;
    ++per_series[key];
  }
  EXPECT_EQ(per_series, (std::map<std::string, int>{{"cpu_percent", 6}, {"gpu_util_percent", 6}, {"mem_util_percent", 6}}));
  // each series' line is level across each window: (start, mean), (end, mean)
  const auto lines = marks(svg, "polyline", "series");
  ASSERT_EQ(lines.size(), 3u);
  for (const Attrs& l : lines) {
    std::istringstream points(l.at("points"));
    std::string xy;
    for (const json& w : run["monitor_windows"]) {
      const double mean = w["utilization"][l.at("data-series")]["mean"].get<double>();
      for (double x : {w["start_s"].get<double>(), w["start_s"].get<double>() + w["seconds"].get<double>()}) {
        ASSERT_TRUE(points >> xy);
        EXPECT_NEAR(m.x(std::stod(xy.substr(0, xy.find(',')))), x, m.x_pixel_at(x)) << xy;
        EXPECT_NEAR(m.y(std::stod(xy.substr(xy.find(',') + 1))), mean, m.y_pixel()) << xy;
      }
    }
    EXPECT_FALSE(points >> xy);
  }
}

TEST(HtmlReportTest, TrainWithFewerThanTwoWindowsIsASentenceWithTheRunSummary) {
  const std::string html = render_html_report(train_run(1));
  EXPECT_EQ(svg_of(html, "chart-utilization"), "");
  const size_t at = html.find("<p class=\"missing\" data-chart=\"chart-utilization\">");
  ASSERT_NE(at, std::string::npos);
  const std::string sentence = html.substr(at, html.find("</p>", at) - at);
  EXPECT_NE(sentence.find("1 monitor window with utilization"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("`log_every`"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("CPU busy 90 % mean"), std::string::npos) << sentence;
  // an older JSON without monitor_windows keeps its summary sentence
  json old = train_run(1);
  old.erase("monitor_windows");
  EXPECT_NE(render_html_report(old).find("no <code>monitor_windows</code>"), std::string::npos);
  json bad = train_run(3);
  bad["monitor_windows"][2]["start_s"] = "soon";
  ASSERT_THROWS_WITH(render_html_report(bad), UsageError, "monitor_windows[2].start_s: expected a number, got string");
}

TEST(HtmlReportTest, ManyTrainWindowsMergeIntoAtMost500MarksOfTheirTimeWeightedMean) {
  const json run = train_run(1200);
  const std::string svg = svg_of(render_html_report(run), "chart-utilization");
  const auto points = marks(svg, "circle", "point");
  ASSERT_EQ(points.size(), 3u * 400);  // three windows a mark
  const Mapping m(svg);
  for (const Attrs& p : points) {
    const int first = std::stoi(p.at("data-window"));
    EXPECT_EQ(p.at("data-windows"), "3");
    double weighted = 0, seconds = 0;
    for (int i = first; i < first + 3; ++i) {
      const json& w = run["monitor_windows"][i];
      weighted += w["utilization"][p.at("data-series")]["mean"].get<double>() * w["seconds"].get<double>();
      seconds += w["seconds"].get<double>();
    }
    EXPECT_NEAR(num(p, "data-y"), weighted / seconds, 1e-9);
    EXPECT_NEAR(m.y(num(p, "cy")), weighted / seconds, m.y_pixel());
    EXPECT_EQ(num(p, "data-first-step"), run["monitor_windows"][first]["first_step"].get<double>());
    EXPECT_EQ(num(p, "data-last-step"), run["monitor_windows"][first + 2]["last_step"].get<double>());
  }
}

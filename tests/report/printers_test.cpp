// Every printer of one search run says the same thing: the same trials in the same order with the
// same numbers, and the same answer; the streaming printers write each trial when it finishes.
#include "saturate/report/printer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/report/report.h"
#include "search/fake_runner.h"

namespace saturate {
namespace {

/// The fake's trials with findings the printers show: a verdict and MFU on trials that ran, an
/// error with a comma, a quote and a pipe on those that did not (escaping).
class FindingRunner final : public TrialRunner {
 public:
  explicit FindingRunner(testing::FakeLaw law) : fake_(law) {}
  Trial run(int64_t batch, const TrialRequest& request) override {
    Trial t = fake_.run(batch, request);
    if (t.ok()) {
      t.findings.bottleneck = BottleneckFinding{batch % 2 ? "compute-bound" : "launch-bound", "why", {}, "fix", {}};
      ComputeFinding c;
      c.flops_per_step = 1e9 * static_cast<double>(batch);
      c.flops_per_sample = 1e9;
      c.achieved_flops_per_s = 3.3e11 / 7;
      c.mfu = 0.123456789 * batch;
      t.findings.compute = c;
      t.seconds = 0.1 * static_cast<double>(batch) / 3;
    } else {
      t.error = "out of memory, \"tried\" | to allocate 12 MiB";
    }
    return t;
  }
  int64_t budget_bytes() const override { return fake_.budget_bytes(); }

 private:
  testing::FakeRunner fake_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

std::vector<std::string> markdown_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 1; i < line.size(); ++i) {  // past the leading '|'
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(cell.substr(cell.find_first_not_of(' ') == std::string::npos ? cell.size() : cell.find_first_not_of(' ')));
      while (!cells.back().empty() && cells.back().back() == ' ') cells.back().pop_back();
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

/// A cell of the csv or markdown table read back into the JSON value it should be.
void expect_cell_is(const std::string& cell, const nlohmann::json& value, const std::string& what) {
  if (value.is_null()) {
    EXPECT_EQ(cell, "") << what;
  } else if (value.is_string()) {
    EXPECT_EQ(cell, value.get<std::string>()) << what;
  } else if (value.is_number_integer()) {
    EXPECT_EQ(std::stoll(cell), value.get<int64_t>()) << what;
  } else {
    EXPECT_EQ(std::stod(cell), value.get<double>()) << what << ": " << cell;  // exact: no digits lost
  }
}

/// A markdown cell read back: the JSON's value within half a unit of the cell's last printed digit
/// ("48.3 MiB" is 48.25-48.35 MiB; "0.7523" is 0.75225-0.75235), bytes in binary units.
void expect_readable_cell_is(const std::string& cell, const nlohmann::json& value, const std::string& column,
                             const std::string& what) {
  if (value.is_null() || value.is_string()) return expect_cell_is(cell, value, what);
  const bool bytes = column.size() > 6 && column.substr(column.size() - 6) == "_bytes";
  size_t end = 0;
  const double printed = std::stod(cell, &end);
  const std::string number = cell.substr(0, end), unit = cell.substr(end);
  const size_t dot = number.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(number.size() - dot - 1);
  double scale = 1;
  if (bytes) {
    const std::map<std::string, double> units = {{" B", 1}, {" KiB", 1024}, {" MiB", 1048576}, {" GiB", 1073741824}};
    ASSERT_TRUE(units.count(unit)) << what << ": '" << cell << "' has no byte unit";
    scale = units.at(unit);
  } else {
    EXPECT_EQ(unit, "") << what << ": " << cell;
    EXPECT_EQ(cell.find('e'), std::string::npos) << what << ": " << cell << " (no exponent for people)";
  }
  if (!bytes && value.is_number_integer()) {
    EXPECT_EQ(decimals, 0) << what << ": " << cell << " (a count is whole)";
  }
  const double want = value.get<double>();
  const double half_unit = 0.5 * std::pow(10.0, -decimals) * scale;
  EXPECT_NEAR(printed * scale, want, half_unit * (1 + 1e-9)) << what << ": " << cell;
  if (!bytes && want != 0 && !value.is_number_integer()) {  // 4 significant digits: no more lost, no more shown
    EXPECT_LE(half_unit / std::fabs(want), 0.5e-3 * (1 + 1e-9)) << what << ": " << cell << " lost digits";
    EXPECT_GT(half_unit / std::fabs(want), std::fabs(want) >= 1000 ? 0.0 : 0.5e-4) << what << ": " << cell;
  }
}

nlohmann::json column_value(const nlohmann::json& t, const std::string& column) {
  // a trial that failed measured no step time or rate: the cell is empty (issue 44: it said 0.0)
  if (t["status"] != "ok" && (column == "step_time_ms" || column == "samples_per_s" || column == "mfu"))
    return nlohmann::json();
  if (column == "bottleneck") return t.contains("bottleneck") ? t["bottleneck"]["verdict"] : nlohmann::json();
  if (column == "mfu") return t.contains("compute") ? t["compute"]["mfu"] : nlohmann::json();
  return t.contains(column) ? t[column] : nlohmann::json();
}

struct Outputs {
  std::ostringstream console, progress, json, jsonl, csv, markdown;
};

TEST(PrintersTest, EveryFormatOfOneSearchShowsTheSameTrialsAndTheSameAnswer) {
  testing::FakeLaw law;
  law.budget_bytes = int64_t{1} << 30;
  law.noise_bytes = 1000;
  FindingRunner runner(law);
  Outputs o;
  std::vector<std::pair<std::unique_ptr<Printer>, std::ostringstream*>> printers;
  printers.emplace_back(make_printer(OutputFormat::kConsole, o.console, &o.progress), &o.progress);
  printers.emplace_back(make_printer(OutputFormat::kJson, o.json), nullptr);
  printers.emplace_back(make_printer(OutputFormat::kJsonLines, o.jsonl), &o.jsonl);
  printers.emplace_back(make_printer(OutputFormat::kCsv, o.csv), &o.csv);
  printers.emplace_back(make_printer(OutputFormat::kMarkdown, o.markdown), &o.markdown);

  RunContext context = run_context_here();
  context.command = "search";
  context.model_name = "fake, with a comma | and a pipe";
  context.device_info = "cpu (2 threads)";
  context.budget_bytes = law.budget_bytes;
  for (auto& [p, _] : printers) p->begin(context);
  SearchOptions options;
  int trials_seen = 0;
  options.on_trial = [&](const Trial& t) {
    ++trials_seen;
    for (auto& [p, stream] : printers) {
      const size_t before = stream ? stream->str().size() : 0;
      p->trial(t);
      if (stream) {
        EXPECT_GT(stream->str().size(), before) << "a streaming printer held trial " << trials_seen << " back";
      }
    }
  };
  const SearchResult result = search_batch_size(runner, options);
  ASSERT_GE(result.trials.size(), 4u);
  ASSERT_TRUE(std::any_of(result.trials.begin(), result.trials.end(), [](const Trial& t) { return !t.ok(); }));
  const nlohmann::json run = search_json(context, result);
  for (auto& [p, _] : printers) {
    p->result(SearchReport{result, run, decide_batch(result), "compute            a note\n", SearchEffort{}});
    p->end();
  }

  // json: the run's JSON, whole
  const nlohmann::json doc = nlohmann::json::parse(o.json.str());
  EXPECT_EQ(doc, run);
  const nlohmann::json& trials = doc["trials"];
  ASSERT_EQ(trials.size(), static_cast<size_t>(trials_seen));

  // jsonl: context, a line per trial equal to the document's trial, a result with the answer
  const auto jl = lines_of(o.jsonl.str());
  ASSERT_EQ(jl.size(), trials.size() + 2);
  nlohmann::json ctx = nlohmann::json::parse(jl.front());
  EXPECT_EQ(ctx["type"], "context");
  ctx.erase("type");
  EXPECT_EQ(ctx, context_json(context));
  for (size_t i = 0; i < trials.size(); ++i) {
    nlohmann::json t = nlohmann::json::parse(jl[i + 1]);
    EXPECT_EQ(t["type"], "trial");
    t.erase("type");
    EXPECT_EQ(t, trials[i]) << "trial " << i;
  }
  const nlohmann::json res = nlohmann::json::parse(jl.back());
  EXPECT_EQ(res["type"], "result");
  for (const char* key : {"recommended_batch", "max_batch", "throughput_batch", "memory_model", "target_bytes"})
    EXPECT_EQ(res[key], doc[key]) << key;

  // csv and markdown: a row per trial, each cell the JSON's value
  const auto& columns = trial_columns();
  std::vector<std::vector<std::string>> csv_rows, md_rows;
  std::map<std::string, std::string> md_answer;
  // plain CSV (issue 29): the header first and a row per trial, no comment lines (csv.DictReader
  // took the first '#' line for the header)
  for (const std::string& line : lines_of(o.csv.str())) csv_rows.push_back(csv_cells(line));
  bool in_table = false;
  for (const std::string& line : lines_of(o.markdown.str())) {
    if (line.rfind("| batch", 0) == 0) in_table = true;
    else if (in_table && line.rfind("|", 0) == 0 && line.find("---") == std::string::npos) md_rows.push_back(markdown_cells(line));
    else if (line.rfind("- ", 0) == 0 && line.find(": ") != std::string::npos)
      md_answer[line.substr(2, line.find(": ") - 2)] = line.substr(line.find(": ") + 2);
    if (line.empty()) in_table = false;
  }
  ASSERT_EQ(csv_rows.size(), trials.size() + 1);  // the header first
  EXPECT_EQ(csv_rows.front(), columns);
  ASSERT_EQ(md_rows.size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i)
    for (size_t c = 0; c < columns.size(); ++c) {
      const nlohmann::json want = column_value(trials[i], columns[c]);
      ASSERT_EQ(csv_rows[i + 1].size(), columns.size());
      ASSERT_EQ(md_rows[i].size(), columns.size());
      expect_cell_is(csv_rows[i + 1][c], want, "csv trial " + std::to_string(i) + " " + columns[c]);
      expect_readable_cell_is(md_rows[i][c], want, columns[c], "markdown trial " + std::to_string(i) + " " + columns[c]);
    }
  // the answer is printed from the typed result and decision: it says what the JSON says
  for (const char* key :
       {"recommended_batch", "max_batch", "throughput_batch", "target_bytes", "budget_bytes", "search_seconds",
        "trial_steps", "strategy"}) {
    expect_readable_cell_is(md_answer[key], doc[key], key, "markdown answer " + std::string(key));
  }
  ASSERT_TRUE(doc["decision"]["batch"].get<int64_t>() > 0) << doc["decision"];
  expect_readable_cell_is(md_answer["batch"], doc["decision"]["batch"], "batch", "markdown answer's decision");
  EXPECT_EQ(md_answer["objective"], doc["decision"]["objective"].get<std::string>());
  EXPECT_EQ(md_answer["reason"], doc["decision"]["reason"].get<std::string>());
  EXPECT_EQ(md_answer["max_batch_exact"], doc["max_batch_exact"].dump());
  EXPECT_EQ(md_answer.count("error"), doc.contains("error") ? 1u : 0u);

  // console: a progress line per trial, the table's rows and the answer, at the table's precision
  EXPECT_EQ(lines_of(o.progress.str()).size(), trials.size());
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, int64_t> answer;
  bool table = false;
  for (const std::string& line : lines_of(o.console.str())) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (!w.empty() && w[0] == "batch" && w.size() > 2 && w[1] == "status") { table = true; continue; }
    if (w.empty()) { table = false; continue; }
    if (table) rows.push_back(w);
    else if (w.size() >= 2 && (w[0] == "recommended_batch" || w[0] == "max_batch" || w[0] == "throughput_batch"))
      answer[w[0]] = std::stoll(w[1]);
  }
  ASSERT_EQ(rows.size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& r = rows[i];  // batch status steps alloc(2 words) resv(2 words) ms samples/s
    ASSERT_EQ(r.size(), 9u) << i;
    EXPECT_EQ(std::stoll(r[0]), trials[i]["batch"].get<int64_t>());
    EXPECT_EQ(r[1], trials[i]["status"].get<std::string>());
    EXPECT_EQ(std::stoll(r[2]), trials[i]["steps"].get<int64_t>());
    const double resv = static_cast<double>(parse_memory_size(r[5] + r[6]).bytes);
    EXPECT_NEAR(resv, trials[i]["peak_reserved_bytes"].get<double>(), 0.01 * resv) << r[5] << r[6];
    if (trials[i]["status"] == "ok") {
      EXPECT_NEAR(std::stod(r[7]), trials[i]["step_time_ms"].get<double>(), 0.005);
      EXPECT_NEAR(std::stod(r[8]), trials[i]["samples_per_s"].get<double>(), 0.05);
    } else {
      EXPECT_EQ(r[7], "-");
    }
  }
  for (const char* key : {"recommended_batch", "max_batch", "throughput_batch"})
    EXPECT_EQ(answer[key], doc[key].get<int64_t>()) << key;
  const std::string decided = fmt::format("decision           train at batch {} (objective {}): {}\n",
                                          doc["decision"]["batch"].get<int64_t>(),
                                          doc["decision"]["objective"].get<std::string>(),
                                          doc["decision"]["reason"].get<std::string>());
  EXPECT_NE(o.console.str().find(decided), std::string::npos) << o.console.str();
  EXPECT_NE(o.console.str().find("compute            a note"), std::string::npos);
  EXPECT_NE(o.markdown.str().find("compute            a note"), std::string::npos);
}

TEST(PrintersTest, AnUnknownFormatIsAUsageErrorNamingItAndTheFormats) {
  try {
    parse_output_format("yaml");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("`format` yaml"), std::string::npos) << what;
    for (const char* f : {"console", "json", "jsonl", "csv", "markdown"}) EXPECT_NE(what.find(f), std::string::npos) << what;
  }
  EXPECT_EQ(parse_output_format("md"), OutputFormat::kMarkdown);
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

// issue 44: `--memory-budget 2TB` under fit printed "max_batch 0 (not exact: the strategy stops at
// a power of two)": every result that was not exact was blamed on the power strategy
TEST(MaxBatchNote, SaysWhyTheMaximumIsWhatItIsForEveryWayASearchEnds) {
  SearchResult r;
  r.strategy = Strategy::kFit;
  r.max_batch = 40;
  r.max_batch_exact = true;
  EXPECT_EQ(max_batch_note(r), "exact: 41 does not fit");
  r.max_batch_exact = false;
  EXPECT_EQ(max_batch_note(r), "not exact: the search stopped before a batch ran out of memory");
  r.strategy = Strategy::kPower;
  EXPECT_EQ(max_batch_note(r), "not exact: the strategy stops at a power of two");
  r.capped = true;
  EXPECT_EQ(max_batch_note(r), "capped by `max_batch`");
  r.capped = false;
  r.error = "std::bad_alloc\nmore";
  EXPECT_EQ(max_batch_note(r), "not exact: a trial failed: std::bad_alloc");
  r.max_batch = 0;
  r.strategy = Strategy::kFit;
  EXPECT_EQ(max_batch_note(r), "nothing ran to the end: std::bad_alloc");
  r.error.clear();
  EXPECT_EQ(max_batch_note(r), "nothing fit: batch 1 ran out of memory");
  // divisors (issue 29): the largest divisor that fits, named by the next one that ran out
  r.strategy = Strategy::kDivisors;
  r.max_batch = 32;
  for (const auto& [batch, status] : {std::pair{64, TrialStatus::kOom}, {32, TrialStatus::kOk}, {128, TrialStatus::kOom}}) {
    Trial t;
    t.batch = batch;
    t.status = status;
    r.trials.push_back(t);
  }
  EXPECT_EQ(max_batch_note(r), "the largest divisor that fits: the next, 64, does not");
}

}  // namespace
}  // namespace saturate

// The tabular printers: CSV (the header and a row per trial, nothing else: csv.DictReader and
// pandas.read_csv read it as it is; the run context and the answer are the JSON's, --json FILE)
// and Markdown (the context as a list,
// a table row per trial, the answer; bytes in binary units and fractions to 4 significant digits,
// for reading, while the csv keeps the JSON's numbers exactly). Both write each row as its trial finishes.
#include <fmt/format.h>

#include "report/printers.h"
#include "saturate/core/units.h"
#include "saturate/report/report.h"

namespace saturate {
namespace {

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string quoted = "\"";
  for (char c : v) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string md_cell(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

std::string what_and_where(const RunContext& c) {
  return fmt::format("{} ({} parameters, input {}), optimizer {}, on {}, budget {}", c.model_name, c.model_parameters,
                     c.input, c.optimizer, c.device_info, format_bytes(c.budget_bytes));
}

/// The answer for reading: the decision leads, then the search's numbers under the names the
/// JSON gives them (bytes in binary units, fractions to 4 significant digits: readable_value).
std::vector<std::pair<std::string, std::string>> answer(const SearchReport& r, const RunContext& c) {
  const SearchResult& s = r.result;
  std::vector<std::pair<std::string, std::string>> kv;
  const auto number = [&kv](const char* key, const nlohmann::json& n) { kv.emplace_back(key, readable_value(key, n)); };
  number("batch", r.decision.batch);
  kv.emplace_back("objective", to_string(r.decision.objective));
  kv.emplace_back("reason", r.decision.reason);
  number("recommended_batch", s.recommended_batch);
  number("max_batch", s.max_batch);
  kv.emplace_back("max_batch_exact", s.max_batch_exact ? "true" : "false");
  number("throughput_batch", s.throughput_batch);
  number("target_bytes", s.target_bytes);
  number("budget_bytes", c.budget_bytes);
  kv.emplace_back("strategy", to_string(s.strategy));
  number("search_seconds", s.search_seconds);
  number("trial_steps", s.trial_steps);
  if (!s.error.empty()) kv.emplace_back("error", s.error);
  return kv;
}

class CsvPrinter final : public Printer {
 public:
  explicit CsvPrinter(std::ostream& out) : out_(out) {}
  void begin(const RunContext&) override {
    std::string header;
    for (const std::string& col : trial_columns()) header += (header.empty() ? "" : ",") + col;
    out_ << header << "\n" << std::flush;
  }
  void trial(const Trial& t) override {
    std::string line;
    bool first = true;
    for (const std::string& v : trial_row(t)) {
      line += (first ? "" : ",") + csv_field(v);
      first = false;
    }
    out_ << line << "\n" << std::flush;
  }
  void result(const SearchReport&) override { out_ << std::flush; }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
};

class MarkdownPrinter final : public Printer {
 public:
  explicit MarkdownPrinter(std::ostream& out) : out_(out) {}
  void begin(const RunContext& c) override {
    context_ = c;
    out_ << fmt::format("## saturate {}: {} on {}\n\n", c.command.empty() ? "search" : c.command, c.model_name,
                        c.device_info);
    out_ << "- run: " << md_cell(what_and_where(c)) << "\n- build: " << md_cell(provenance_line(c)) << "\n\n";
    std::string header = "|", rule = "|";
    for (const std::string& col : trial_columns()) {
      header += " " + col + " |";
      rule += (col == "status" || col == "bottleneck" || col == "error") ? " --- |" : " ---: |";
    }
    out_ << header << "\n" << rule << "\n" << std::flush;
  }
  void trial(const Trial& t) override {
    std::string line = "|";
    for (const std::string& v : trial_row_for_reading(t)) line += " " + md_cell(v) + " |";
    out_ << line << "\n" << std::flush;
  }
  void result(const SearchReport& r) override {
    out_ << "\n### Answer\n\n";
    for (const auto& [k, v] : answer(r, context_)) out_ << "- " << k << ": " << md_cell(v) << "\n";
    if (!r.notes.empty()) out_ << "\n```text\n" << r.notes << (r.notes.back() == '\n' ? "" : "\n") << "```\n";
    out_ << std::flush;
  }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
  RunContext context_;
};

}  // namespace

std::unique_ptr<Printer> make_csv_printer(std::ostream& out) { return std::make_unique<CsvPrinter>(out); }
std::unique_ptr<Printer> make_markdown_printer(std::ostream& out) { return std::make_unique<MarkdownPrinter>(out); }

}  // namespace saturate

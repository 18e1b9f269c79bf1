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

/// The answer as key/value pairs, from the run JSON (the same numbers the JSON printer writes).
std::vector<std::pair<std::string, std::string>> answer(const nlohmann::json& j) {
  std::vector<std::pair<std::string, std::string>> kv;
  if (j.contains("decision") && j["decision"].is_object()) {  // the one answer leads
    const auto& d = j["decision"];
    kv.emplace_back("batch", d.value("batch", nlohmann::json(0)).dump());
    kv.emplace_back("objective", d.value("objective", ""));
    kv.emplace_back("reason", d.value("reason", ""));
  }
  for (const char* key : {"recommended_batch", "max_batch", "max_batch_exact", "throughput_batch", "target_bytes",
                          "budget_bytes", "strategy", "search_seconds", "trial_steps", "error"})
    if (j.contains(key)) kv.emplace_back(key, j[key].is_string() ? j[key].get<std::string>() : j[key].dump());
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
    for (const auto& [k, v] : answer(r.json)) {
      const nlohmann::json n = nlohmann::json::parse(v, nullptr, false);  // a number reads as people read it
      out_ << "- " << k << ": " << md_cell(n.is_number() ? readable_value(k, n) : v) << "\n";
    }
    if (!r.notes.empty()) out_ << "\n```text\n" << r.notes << (r.notes.back() == '\n' ? "" : "\n") << "```\n";
    out_ << std::flush;
  }
  void end() override { out_.flush(); }

 private:
  std::ostream& out_;
};

}  // namespace

std::unique_ptr<Printer> make_csv_printer(std::ostream& out) { return std::make_unique<CsvPrinter>(out); }
std::unique_ptr<Printer> make_markdown_printer(std::ostream& out) { return std::make_unique<MarkdownPrinter>(out); }

}  // namespace saturate

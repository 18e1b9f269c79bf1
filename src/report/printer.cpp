#include "saturate/report/printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "saturate/core/errors.h"
#include "report/printers.h"
#include "saturate/core/units.h"
#include "saturate/report/report.h"

namespace saturate {

std::string to_string(OutputFormat f) {
  switch (f) {
    case OutputFormat::kConsole: return "console";
    case OutputFormat::kJson: return "json";
    case OutputFormat::kJsonLines: return "jsonl";
    case OutputFormat::kCsv: return "csv";
    case OutputFormat::kMarkdown: return "markdown";
  }
  return "?";
}

OutputFormat parse_output_format(const std::string& text) {
  for (OutputFormat f : {OutputFormat::kConsole, OutputFormat::kJson, OutputFormat::kJsonLines, OutputFormat::kCsv,
                         OutputFormat::kMarkdown})
    if (text == to_string(f)) return f;
  if (text == "md") return OutputFormat::kMarkdown;
  throw UsageError(fmt::format("`format` {}: unknown format; use console, json, jsonl, csv or markdown",
                                         text.empty() ? "''" : text));
}

OutputFormat search_output_format(const std::string& format, const std::string& json) {
  const OutputFormat f = parse_output_format(format);
  if (json != "-") return f;
  if (f != OutputFormat::kConsole && f != OutputFormat::kJson)
    throw UsageError(fmt::format("`json` - writes JSON to stdout, and so would `format` {}; give `json` FILE to keep "
                                 "both, or drop one",
                                 format));
  return OutputFormat::kJson;
}

const std::vector<std::string>& trial_columns() {
  static const std::vector<std::string> columns = {
      "batch",   "status",  "steps",         "peak_allocated_bytes", "peak_reserved_bytes", "step_time_ms",
      "samples_per_s", "seconds", "data_wait_fraction", "bottleneck", "mfu", "error"};
  return columns;
}

std::vector<std::string> trial_row(const nlohmann::json& t) {
  std::vector<std::string> row;
  // a trial that did not run to the end has no step time and no rate (its JSON's 0 is no measurement)
  const bool ran = t.value("status", std::string()) == "ok";
  for (const std::string& c : trial_columns()) {
    const nlohmann::json* v = nullptr;
    if (!ran && (c == "step_time_ms" || c == "samples_per_s" || c == "mfu")) {
      row.emplace_back();
      continue;
    }
    if (c == "bottleneck") {
      if (t.contains("bottleneck")) v = &t["bottleneck"]["verdict"];
    } else if (c == "mfu") {
      if (t.contains("compute") && t["compute"].contains("mfu")) v = &t["compute"]["mfu"];
    } else if (t.contains(c)) {
      v = &t[c];
    }
    if (!v || v->is_null()) row.emplace_back();
    else if (v->is_string()) row.push_back(v->get<std::string>());
    else row.push_back(v->dump());  // the JSON's own spelling of the number: exactly its value
  }
  return row;
}

std::string readable_value(const std::string& key, const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_number()) return value.dump();
  const bool bytes = key.size() >= 6 && key.compare(key.size() - 6, 6, "_bytes") == 0;
  if (bytes) return format_bytes(value.get<int64_t>());
  if (value.is_number_integer()) return value.dump();
  const double x = value.get<double>();
  if (x == 0.0 || !std::isfinite(x)) return value.dump();
  // 4 significant digits, as many decimals as that takes (none from 1000 up), no exponent
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(x))));
  const int decimals = std::clamp(3 - magnitude, 0, 9);
  return fmt::format("{:.{}f}", x, decimals);
}

std::vector<std::string> trial_row_for_reading(const nlohmann::json& t) {
  std::vector<std::string> row = trial_row(t);
  const auto& columns = trial_columns();
  for (size_t c = 0; c < columns.size(); ++c) {
    if (row[c].empty()) continue;
    const nlohmann::json v = nlohmann::json::parse(row[c], nullptr, false);
    if (v.is_number()) row[c] = readable_value(columns[c], v);
  }
  return row;
}

}  // namespace saturate

namespace saturate {

std::unique_ptr<Printer> make_printer(OutputFormat format, std::ostream& out, std::ostream* progress,
                                      OptionNamer name_of) {
  switch (format) {
    case OutputFormat::kConsole: return make_console_printer(out, progress, std::move(name_of));
    case OutputFormat::kJson: return make_json_printer(out);
    case OutputFormat::kJsonLines: return make_json_lines_printer(out);
    case OutputFormat::kCsv: return make_csv_printer(out);
    case OutputFormat::kMarkdown: return make_markdown_printer(out);
  }
  throw InternalError("make_printer: unknown format");
}

}  // namespace saturate

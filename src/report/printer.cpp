#include "saturate/report/printer.h"

#include <nlohmann/json.hpp>

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

namespace {

/// A trial's cells under trial_columns(), from its typed fields: a number as the JSON printer
/// writes it, a word, or null for an empty cell (a trial that did not run to the end has no step
/// time, rate or MFU: its 0 is no measurement).
std::vector<nlohmann::json> trial_cells(const Trial& t) {
  const TrialFindings& f = t.findings;
  const nlohmann::json none;
  const bool has_mfu = t.ok() && f.compute && f.compute->mfu.has_value();
  return {t.batch,
          to_string(t.status),
          t.steps,
          t.peak_allocated_bytes,
          t.peak_reserved_bytes,
          t.ok() ? nlohmann::json(t.step_time_ms) : none,
          t.ok() ? nlohmann::json(t.samples_per_s) : none,
          t.seconds,
          f.data ? nlohmann::json(f.data->wait_fraction) : none,
          f.bottleneck ? nlohmann::json(f.bottleneck->verdict) : none,
          has_mfu ? nlohmann::json(f.compute->mfu.value()) : none,
          t.error.empty() ? none : nlohmann::json(t.error)};
}

}  // namespace

std::vector<std::string> trial_row(const Trial& t) {
  std::vector<std::string> row;
  for (const nlohmann::json& v : trial_cells(t)) {
    if (v.is_null()) row.emplace_back();
    else if (v.is_string()) row.push_back(v.get<std::string>());
    else row.push_back(v.dump());  // the JSON's own spelling of the number: exactly its value
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

std::vector<std::string> trial_row_for_reading(const Trial& t) {
  std::vector<std::string> row = trial_row(t);
  const std::vector<nlohmann::json> cells = trial_cells(t);
  const auto& columns = trial_columns();
  for (size_t c = 0; c < columns.size(); ++c)
    if (cells[c].is_number() && !(cells[c].is_number_float() && std::isnan(cells[c].get<double>())))
      row[c] = readable_value(columns[c], cells[c]);  // NaN stays as the JSON writes it, null
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

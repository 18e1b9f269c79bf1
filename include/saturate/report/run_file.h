// Implements: reading a run's JSON back for the report (`saturate report RUN.json`, Python's
// saturate.report): a missing, unreadable, empty or invalid file is bad input, named with what to
// give instead; and where the report goes by default (RUN.html next to RUN.json).
#pragma once
#include <istream>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace saturate {

/// The text of the file at `path`; a UsageError for a missing, unreadable file or a folder.
std::string read_run_file(const std::string& path);
/// The text of `in` (a file, stdin), read from `name`: no more than 64 MiB, past that a
/// UsageError (no run's JSON is that large; /dev/zero is endless).
std::string read_run_text(std::istream& in, const std::string& name);
/// The run JSON in `text`, read from `name`; a UsageError for empty text, invalid JSON or a number
/// the format does not allow (batches, steps, peaks and budgets whole and >= 0; times and rates
/// >= 0; every number finite), naming its path ("trials[3].peak_reserved_bytes").
nlohmann::json parse_run_json(const std::string& text, const std::string& name);
/// The HTML report of `run`, read from `name` (errors of the run name the file).
std::string render_run_report(const nlohmann::json& run, const std::string& name);
/// RUN.json -> RUN.html next to it; anything else gets .html added; "-" stays "-".
std::string default_report_path(const std::string& input);

}  // namespace saturate

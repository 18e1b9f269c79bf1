// Implements: one printer interface for a search's output, chosen by --format: the run context
// first, each trial as it finishes (flushed, so a pipe sees it at once), the result, the end.
//   console   the table and the answer for people (trial lines on the progress stream)
//   json      one JSON document at the end (the JSON contract, docs/search.md)
//   jsonl     one JSON object per line: {"type":"context"}, {"type":"trial"} per trial, {"type":"result"}
//   csv       one row per trial (header first); context and answer as '#' comment lines
//   markdown  the context as a list, a table row per trial, the answer
// Every printer prints the same typed result: the JSON printers through trial_json and the report's
// json, the text printers (console, csv, markdown) from the Trial, the SearchResult and the
// BatchDecision without reading a JSON key; tests/report/printers_test.cpp checks that they agree.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/option_text.h"
#include "saturate/probe/trial.h"
#include "saturate/report/run_context.h"
#include "saturate/search/decision.h"
#include "saturate/search/search.h"

namespace saturate {

enum class OutputFormat { kConsole, kJson, kJsonLines, kCsv, kMarkdown };
std::string to_string(OutputFormat f);
/// "console", "json", "jsonl", "csv", "markdown" (also "md"); UsageError naming --format otherwise.
OutputFormat parse_output_format(const std::string& text);
/// The format of a search's stdout for `format` beside `json` ("-": JSON on stdout, which only
/// console or json may share; a UsageError naming both otherwise).
OutputFormat search_output_format(const std::string& format, const std::string& json);

/// What a run that searched several curves did in all (checkpointing auto: without and with
/// checkpointing); `curves` 0: the run searched only the result's curve.
struct SearchEffort {
  size_t trials = 0;
  int64_t training_steps = 0;
  double seconds = 0;
  int curves = 0;
};
/// The sum over `curves` (none: curves 0).
SearchEffort effort_of(const std::vector<const SearchResult*>& curves);

/// What a finished search hands its printers.
struct SearchReport {
  const SearchResult& result;
  /// The run's whole JSON: search_json plus every section the command added (compute, ...); the
  /// JSON printers write it, the text printers read none of it.
  const nlohmann::json& json;
  /// The one answer (search/decision.h): the console's and Markdown's answer lead with it.
  BatchDecision decision;
  /// Lines for people after the answer (compute, fast paths, checkpointing, ranks, data).
  std::string notes;
  /// The whole run when it searched more than the result's curve (the console's header counts it).
  SearchEffort whole_run;
};

class Printer {
 public:
  virtual ~Printer() = default;
  virtual void begin(const RunContext& context) = 0;
  /// A trial that just finished (in the order the search ran them).
  virtual void trial(const Trial& trial) = 0;
  virtual void result(const SearchReport& report) = 0;
  virtual void end() = 0;
};

/// A printer writing to `out`; the console printer writes its per-trial lines to `progress`
/// (stderr on the command line; null: none) and names the options its text mentions (`max_batch`)
/// with `name_of` (the command line: its flags; empty: as written, name_options).
std::unique_ptr<Printer> make_printer(OutputFormat format, std::ostream& out, std::ostream* progress = nullptr,
                                      OptionNamer name_of = {});

/// The columns of a trial in the csv and markdown printers, in order, and a trial's values for
/// them as text (each number exactly as the JSON printer writes it; "" when the trial lacks one).
const std::vector<std::string>& trial_columns();
std::vector<std::string> trial_row(const Trial& trial);

/// The same row for people (the markdown table): byte counts in binary units ("48.3 MiB", as
/// format_bytes), other fractional numbers to 4 significant digits without an exponent ("0.7523",
/// "1235"); integers, words and empty cells as trial_row.
std::vector<std::string> trial_row_for_reading(const Trial& trial);

/// A JSON number as a person reads it: bytes (`key` ends in "_bytes") as format_bytes, a fraction
/// to 4 significant digits, an integer whole; anything else as dumped.
std::string readable_value(const std::string& key, const nlohmann::json& value);

}  // namespace saturate

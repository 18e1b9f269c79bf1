// Implements: what each library option means and allows, written once. Every session's options
// (train, search, memory, the workload, data, the monitor, ranks, launch) are documented here by
// their field names: a sentence of help, and for numbers the range allowed with what a value
// means. check() calls validate against these ranges, the command line builds its flags' help
// and range checks from them (its table maps each option to a flag), and Python's errors and
// docstrings read the same text. Other options are named in backticks (`micro_batch`), which each
// front-end says its own way (core/option_text.h).
#pragma once
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace saturate {

struct OptionDoc {
  /// The option's field name ("epochs"), or "command.option" where one command documents an
  /// option its own way ("train.target_fraction": the micro-batch's share of the budget).
  std::string_view key;
  std::string_view help;
  /// The numeric range allowed, both ends included; NaN for an option that is not a number.
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  /// What a value means, ending a range error: "optimizer steps; 0: at epoch ends".
  std::string_view meaning;

  /// {key, help} for an option that is not a number; {key, help, min, max, meaning} for one that is.
  constexpr OptionDoc(std::string_view key_, std::string_view help_,
                      double min_ = std::numeric_limits<double>::quiet_NaN(),
                      double max_ = std::numeric_limits<double>::quiet_NaN(), std::string_view meaning_ = {})
      : key(key_), help(help_), min(min_), max(max_), meaning(meaning_) {}

  bool has_range() const { return min == min; }
};

/// The documentation for `key`, or nullptr when no option has that key.
const OptionDoc* find_option_doc(std::string_view key);
/// The documentation for `key`; an InternalError when none (a key is the library's own word).
const OptionDoc& option_doc(std::string_view key);
/// Every documented option, in the order of the table.
const std::vector<OptionDoc>& option_docs();

/// The heading `key` is listed under in a command's help ("Model", "Memory and precision", "Data",
/// "Search", "Step", "Training", "Monitor", "Ranks", "Output"); "Output" for a key not documented
/// here (a front-end's own option, such as the output format).
std::string_view option_group(std::string_view key);

/// The option a key documents: "train.target_fraction" -> "target_fraction".
std::string_view option_name(std::string_view key);

/// A limit as people write it: 1024, 1000000, 1e+12, 0.01.
std::string limit_text(double v);

/// One meaning per flag name (issue 44): `arg` as given on the command line ("--steps=5"), when
/// `command` does not take it because another subcommand gives the name its meaning (steps are
/// train's optimizer steps): a sentence naming the option `command` spells that count with (as
/// `key`, for the front-end to say as its flag); "" otherwise.
std::string moved_option_note(std::string_view command, std::string_view arg);
/// The documented range of `doc`: "1..1024".
std::string range_text(const OptionDoc& doc);

/// `value` lies in the range documented for `key`; otherwise a UsageError about the option
/// (its name, without the command) that says the value, the range and what a value means.
void check_option_range(std::string_view key, double value);

/// The one grammar of every numeric option (issue 43): why `text` is not a value in lo..hi, ""
/// when it is. Decimal only (no hex: "0x10" is refused everywhere), finite; `whole`: digits with an
/// optional sign, compared exactly (18446744073709551616 is not 2^64 - 1, -1 is not a large
/// unsigned); a value too small to be told from 0 (a subnormal) is said so, not "outside".
/// `meaning` ends the message ("optimizer steps; 0: at epoch ends").
std::string number_text_problem(const std::string& text, double lo, double hi, bool whole, const std::string& meaning);

/// `text` as a whole integer (digits with an optional sign, nothing before or after); nullopt
/// otherwise. For options written as a count or a word (`workers` auto, `max_tokens` auto).
std::optional<long long> parse_whole_number(const std::string& text);

}  // namespace saturate

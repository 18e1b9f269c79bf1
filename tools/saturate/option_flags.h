// The flag table: each library option as the command line spells it (llama.cpp's common_arg:
// one row per argument). A row names the option's key (core/option_doc.h), its flags, whether
// --help shows the default and the environment variable that sets it; the help and the range
// come from the library's documentation, so that a flag and the option's check() never drift.
// The same rows say an option as its flag in the library's messages (with_flags).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "saturate/session/run_paths.h"

namespace saturate::cli {

struct FlagRow {
  const char* key;    ///< an option_doc key ("train.target_fraction"), or an option only messages name
  const char* names;  ///< "--batch,-b"; a row only messages use may hold words ("the world size")
  bool show_default = false;
  const char* env = nullptr;
  const char* help = nullptr;  ///< the command line's own options (--quiet, --format); else the library's
};

/// The row for `key`; an InternalError for a key the table lacks.
const FlagRow& flag_row(std::string_view key);
/// Help, range check (`whole`: an integer flag), default and environment variable of `row` on `option`.
CLI::Option* describe(CLI::Option* option, const FlagRow& row, bool whole = false);

/// Refuses an empty value (an unset shell variable) naming the flag.
extern const CLI::Validator kNotEmpty;

/// The flag of the option `key` bound to `field`: `bool` fields as switches; text never empty.
template <class T>
CLI::Option* add_option_flag(CLI::App& app, std::string_view key, T& field) {
  const FlagRow& row = flag_row(key);
  if constexpr (std::is_same_v<T, bool>)
    return describe(app.add_flag(row.names, field), row);
  else if constexpr (std::is_same_v<T, std::string>)
    return describe(app.add_option(row.names, field), row)->check(kNotEmpty);
  else
    return describe(app.add_option(row.names, field), row,
                    std::is_integral_v<T> || std::is_same_v<T, std::optional<int64_t>>);  // optionals: unset unless given
}

/// The options of the parsed command `cmd`, given or defaulted, by option name (session/run_paths.h).
std::vector<OptionValue> option_values(const CLI::App& cmd);

/// A check for a count of CPU threads: 0..4 per core of this machine.
CLI::Validator thread_count(const std::string& meaning);

/// The flag that sets a library option ("global_batch" -> "--global-batch"); nullopt when no
/// flag sets it.
std::optional<std::string> find_flag_for_option(const std::string& option);
/// The flag that sets a library option; the option itself when no flag sets it.
std::string flag_for_option(const std::string& option);
/// A library message with each option it names mid-sentence (`global_batch`) said as its flag
/// (--global-batch); options no flag sets stay as written (name_options).
std::string with_flags(const std::string& message);

}  // namespace saturate::cli

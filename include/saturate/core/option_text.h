// Implements: options named inside a sentence. The library writes an option mid-sentence as
// `micro_batch` (its field name in backticks); each front-end names it its own way: the command
// line by its flag (--batch), Python by its keyword, a C++ caller reads the field name it set.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace saturate {

/// A per-rank option's values: "48,16" -> {"48", "16"}; no comma: the one value; empty items kept
/// (the caller names them).
std::vector<std::string> split_list(const std::string& text);

/// How a front-end names a library option ("global_batch" -> "--global-batch"); nullopt for an
/// option it does not know (that one stays as it was written).
using OptionNamer = std::function<std::optional<std::string>(const std::string& option)>;

/// `text` with each backticked option `like_this` ([a-z][a-z0-9_]*) for which `name_of` returns a
/// value replaced by that value, backticks dropped; any other backticked text (an unknown option,
/// `x + 1`, an unclosed backtick) is left exactly as it was.
std::string name_options(const std::string& text, const OptionNamer& name_of);

}  // namespace saturate

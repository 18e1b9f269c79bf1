// Implements: text that is safe to print on a terminal. Anything that came from a file or a
// user's value (a JSON key, a path, a lock file's content) may hold escape sequences that set a
// terminal's title, clear its screen or fake output (issue 43: a run JSON's key reached the
// terminal raw). Every message the command line prints goes through terminal_text.
#pragma once
#include <string>
#include <string_view>

namespace saturate {

/// `text` with every control character (C0 but newline and tab, DEL, and the C1 range as UTF-8
/// encodes it: U+0080..U+009F) shown as '?'.
std::string terminal_text(std::string_view text);

}  // namespace saturate

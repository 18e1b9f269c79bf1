#include "saturate/core/option_text.h"

namespace saturate {
namespace {
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_option_char(char c) { return is_lower(c) || (c >= '0' && c <= '9') || c == '_'; }
}  // namespace

std::string name_options(const std::string& text, const OptionNamer& name_of) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '`') {
      out += text[i++];
      continue;
    }
    // `name`: a lower-case letter, then letters, digits and underscores, then the closing backtick
    size_t end = i + 1;
    if (end < text.size() && is_lower(text[end]))
      while (end < text.size() && is_option_char(text[end])) ++end;
    if (end > i + 1 && end < text.size() && text[end] == '`') {
      const std::string option = text.substr(i + 1, end - i - 1);
      if (const std::optional<std::string> name = name_of(option)) {
        out += *name;
        i = end + 1;
        continue;
      }
      out += text.substr(i, end + 1 - i);  // an option the front-end does not name: as written
      i = end + 1;
      continue;
    }
    out += text[i++];  // a backtick that opens no option: as written
  }
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> each;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
    each.push_back(text.substr(start, comma - start));
  each.push_back(text.substr(start));
  return each;
}

}  // namespace saturate

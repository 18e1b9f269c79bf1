#include "dist/job_settings.h"

#include <fmt/format.h>

#include "saturate/core/terminal_text.h"

namespace saturate {
namespace {

/// One line of the store's record: no newline either.
std::string printable(const std::string& s) {
  std::string out = terminal_text(s);
  for (char& c : out)
    if (c == '\n' || c == '\t') c = '?';
  return out;
}

JobSettings& recorded() {
  static JobSettings settings;
  return settings;
}

}  // namespace

std::string JobSettings::text() const {
  std::string out;
  for (const auto& [name, value] : items) out += printable(name) + "=" + printable(value) + "\n";
  return out;
}

JobSettings JobSettings::parse(const std::string& text) {
  JobSettings s;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) s.items.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    at = end + 1;
  }
  return s;
}

std::string JobSettings::difference(const JobSettings& theirs, const std::string& theirs_name) const {
  const auto value_in = [](const JobSettings& s, const std::string& name) -> const std::string* {
    for (const auto& [n, v] : s.items)
      if (n == name) return &v;
    return nullptr;
  };
  const auto said = [](const std::string* v) { return v ? printable(*v) : std::string("not given"); };
  const auto has = [](const std::string* v) { return v ? "has " + printable(*v) : std::string("does not give it"); };
  // the command first: ranks on different commands differ in everything after it
  for (const JobSettings* side : {this, &theirs})
    for (const auto& [name, value] : side->items) {
      const std::string* mine = value_in(*this, name);
      const std::string* other = value_in(theirs, name);
      if (mine && other && *mine == *other) continue;
      return fmt::format("`{}` {} ({} {})", printable(name), said(mine), theirs_name, has(other));
    }
  return "";
}

void set_job_settings(JobSettings settings) { recorded() = std::move(settings); }

const JobSettings& job_settings() { return recorded(); }

}  // namespace saturate

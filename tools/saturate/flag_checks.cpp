#include "flag_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "saturate/core/option_doc.h"

namespace saturate::cli {
CLI::Validator in_range(double lo, double hi, const std::string& meaning) {
  const std::string range = limit_text(lo) + ".." + limit_text(hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(begin, &end);
        if (text.empty() || end != begin + text.size() || !std::isfinite(v))
          return fmt::format("'{}' is not a number; give one in {}{}", text, range, meaning.empty() ? "" : " (" + meaning + ")");
        if (errno == ERANGE || v < lo || v > hi)
          return fmt::format("{} is outside {}{}", text, range, meaning.empty() ? "" : " (" + meaning + ")");
        return "";
      },
      range);
}

int max_threads() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(4 * (cores > 0 ? cores : 1));
}

CLI::Validator thread_count(const std::string& meaning) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return in_range(0, max_threads(), fmt::format("{}; at most 4 per core on this machine's {}", meaning, cores));
}

}  // namespace saturate::cli

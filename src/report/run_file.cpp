#include "saturate/report/run_file.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/report/html_report.h"

namespace saturate {
namespace {

constexpr const char* kWhatToGive = "give the file that saturate search, memory, probe or train wrote with `json` FILE";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// What a number under `key` may be in a run's JSON: "" for any finite number, else the rule.
const char* rule_for(const std::string& key) {
  if (key == "batch" || ends_with(key, "_batch") || key == "steps" || ends_with(key, "_steps") ||
      key == "world_size" || ends_with(key, "peak_allocated_bytes") || ends_with(key, "peak_reserved_bytes") ||
      key == "budget_bytes" || key == "target_bytes")
    return "a whole number in 0..9223372036854775807";
  if (ends_with(key, "_ms") || key == "seconds" || ends_with(key, "_seconds") || ends_with(key, "samples_per_s"))
    return "a finite number >= 0";
  return "";
}

/// Every number of the run `j` as the format allows (whole, non-negative batches, steps, peaks
/// and budgets; non-negative times and rates); a UsageError naming the first that is not, by path.
void check_numbers(const nlohmann::json& j, const std::string& path, const std::string& key, const std::string& name) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      check_numbers(it.value(), path.empty() ? it.key() : path + "." + it.key(), it.key(), name);
    return;
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) check_numbers(j[i], fmt::format("{}[{}]", path, i), key, name);
    return;
  }
  if (!j.is_number()) return;
  const double v = j.get<double>();
  const std::string rule = rule_for(key);
  bool ok = std::isfinite(v);
  if (ok && !rule.empty()) ok = v >= 0;
  if (ok && rule.rfind("a whole", 0) == 0) ok = j.is_number_integer() || (v == std::floor(v) && v < 9.2e18);
  if (!ok)
    throw UsageError(fmt::format("{}: {} is {}, not {}; this is not a run's JSON as saturate writes it; {}", name,
                                 path, j.dump(), rule.empty() ? std::string("a finite number") : rule, kWhatToGive));
}

}  // namespace

std::string read_run_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw UsageError(fmt::format("{}: {}; {}", path, errno == ENOENT ? "no such file" : std::strerror(errno), kWhatToGive));
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("{}: is a folder; {}", path, kWhatToGive));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot be read: {}", path, std::strerror(errno)));
  return read_run_text(in, path);
}

std::string read_run_text(std::istream& in, const std::string& name) {
  // a run's JSON is kilobytes (a million losses: ~20 MiB); /dev/zero or a stray disk image is not one
  constexpr int64_t kMost = int64_t{64} << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMost)
      throw UsageError(fmt::format("{}: more than {}, larger than any run's JSON; {}", name, format_bytes(kMost),
                                   kWhatToGive));
  }
  if (in.bad()) throw UsageError(fmt::format("{}: cannot be read: {}", name, std::strerror(errno)));
  return text;
}

nlohmann::json parse_run_json(const std::string& text, const std::string& name) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UsageError(fmt::format("{}: is empty; {}", name, kWhatToGive));
  nlohmann::json run;
  try {
    run = nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range& e) {  // 1e999: a number JSON allows and a double cannot hold
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    throw UsageError(fmt::format("{}: a number past what a double holds ({}); {}", name, what, kWhatToGive));
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    throw UsageError(fmt::format("{}: not valid JSON ({}); {}", name, what, kWhatToGive));
  }
  check_numbers(run, "", "", name);
  return run;
}

std::string render_run_report(const nlohmann::json& run, const std::string& name) {
  try {
    return render_html_report(run);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", name, e.what()));
  }
}

std::string default_report_path(const std::string& input) {
  if (input == "-") return "-";
  const std::string ext = ".json";
  if (input.size() > ext.size() && input.compare(input.size() - ext.size(), ext.size(), ext) == 0)
    return input.substr(0, input.size() - ext.size()) + ".html";
  return input + ".html";
}

}  // namespace saturate

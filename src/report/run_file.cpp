#include "saturate/report/run_file.h"

#include <sys/stat.h>

#include <cerrno>
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
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    throw UsageError(fmt::format("{}: not valid JSON ({}); {}", name, what, kWhatToGive));
  }
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

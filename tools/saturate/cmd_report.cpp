// saturate report: a run's JSON (search, memory, probe or train --json) as one self-contained
// HTML page with charts and the decision in words (report/html_report.h; docs/report.md).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "commands.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"
#include "saturate/report/html_report.h"

namespace saturate::cli {
namespace {

constexpr const char* kWhatToGive = "give the file that saturate search, memory, probe or train wrote with --json FILE";

/// The text of `path` ('-': stdin); a missing, unreadable or empty file is bad input, named.
std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw UsageError(fmt::format("{}: {}; {}", path, errno == ENOENT ? "no such file" : std::strerror(errno), kWhatToGive));
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("{}: is a folder; {}", path, kWhatToGive));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot be read: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UsageError(fmt::format("{}: cannot be read: {}", path, std::strerror(errno)));
  return text.str();
}

/// RUN.json -> RUN.html next to it; stdin -> stdout.
std::string default_output(const std::string& input) {
  if (input == "-") return "-";
  const std::string ext = ".json";
  if (input.size() > ext.size() && input.compare(input.size() - ext.size(), ext.size(), ext) == 0)
    return input.substr(0, input.size() - ext.size()) + ".html";
  return input + ".html";
}

}  // namespace

void add_report_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "report", "Turn a run's JSON (search, memory, probe or train --json) into one self-contained HTML page: charts "
                "and the decision in words");
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("RUN.json", *input, "the JSON a run wrote with --json FILE ('-': stdin)")->required();
  add_option_flag(*cmd, "output", *output);
  add_option_flag(*cmd, "report.quiet", *quiet);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      const std::string out = output->empty() ? default_output(*input) : *output;
      if (out != "-") check_output_path(out, {"-o", "report.html"});
      const std::string text = read_input(*input);
      const std::string name = *input == "-" ? std::string("stdin") : *input;
      if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw UsageError(fmt::format("{}: is empty; {}", name, kWhatToGive));
      nlohmann::json run;
      try {
        run = nlohmann::json::parse(text);
      } catch (const nlohmann::json::parse_error& e) {
        std::string what = e.what();
        if (const size_t at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
          what = what.substr(at + 2);
        throw UsageError(fmt::format("{}: not valid JSON ({}); {}", name, what, kWhatToGive));
      }
      std::string html;
      try {
        html = with_flags(render_html_report(run));
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", name, e.what()));
      }
      if (out == "-") {
        std::cout << html << std::flush;
      } else {
        write_output_file(out, html, {"-o", "report.html"});
        if (!*quiet)
          std::cerr << fmt::format("saturate: {} report of {} written to {} ({})\n", run_kind(run), name, out,
                                   format_bytes(static_cast<int64_t>(html.size())));
      }
      return 0;
    };
  });
}

}  // namespace saturate::cli

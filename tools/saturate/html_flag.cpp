#include "html_flag.h"

#include "commands.h"

#include "saturate/core/output_file.h"
#include "saturate/report/html_report.h"

namespace saturate::cli {

namespace {
const OutputFileOptions kHtml{"--html", "report.html"};
}

void add_html_flag(CLI::App& app, std::string& path) { add_option_flag(app, "html", path); }

void check_html_path(const std::string& path) {
  if (!path.empty()) check_output_path(path, kHtml);
}

void write_html_report(const nlohmann::json& run, const std::string& path) {
  // the report names options (`json`); the command line's report names its flags
  if (!path.empty()) write_output_file(path, with_flags(render_html_report(run)), kHtml);
}

}  // namespace saturate::cli

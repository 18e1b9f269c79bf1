// saturate report: a run's JSON (search, memory, probe or train --json) as one self-contained
// HTML page with charts and the decision in words (report/html_report.h; docs/report.md).
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"
#include "saturate/report/html_report.h"
#include "saturate/report/run_file.h"

namespace saturate::cli {

void add_report_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "report", "Turn a run's JSON (search, memory, probe or train --json) into one self-contained HTML page: charts "
                "and the decision in words");
  auto input = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("RUN.json", *input, "the JSON a run wrote with --json FILE ('-': stdin)")->required()->check(kNotEmpty);
  add_option_flag(*cmd, "output", *output);
  add_option_flag(*cmd, "report.quiet", *quiet);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      const std::string out = output->empty() ? default_report_path(*input) : *output;
      if (out != "-") check_output_path(out, {"-o", "report.html"});
      const std::string text = *input == "-" ? read_run_text(std::cin, "stdin") : read_run_file(*input);
      const std::string name = *input == "-" ? std::string("stdin") : *input;
      const nlohmann::json run = parse_run_json(text, name);
      const std::string html = with_flags(render_run_report(run, name));
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

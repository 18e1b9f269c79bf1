// saturate: find the batch size, precision and loader settings that keep a GPU saturated.
// main parses flags, runs the chosen subcommand and turns outcomes into exit statuses:
// 0 ok, 1 runtime failure, 2 usage error, 70 internal error (a bug in saturate: EX_SOFTWARE),
// 128 + N stopped by signal N before any step (a rendezvous, a batch-size search; --json says where).
#include <iostream>

#include "commands.h"
#include "saturate/core/build_info.h"
#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/stop_signals.h"
#include "saturate/core/terminal_text.h"
#include "saturate/core/torch_error.h"
#include "saturate/report/report.h"
#include "saturate/session/run_paths.h"

namespace {

/// A first word that is not a flag names the command: an unknown one is said as such (CLI11
/// would only say that a subcommand is required). True when it was unknown.
bool refuse_unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return false;
  std::string known;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    found = found || sub->check_name(argv[1]);
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  if (!found)
    std::cerr << "saturate: error: unknown command '" << argv[1] << "'; the commands are " << known
              << " (saturate --help)\n";
  return !found;
}

/// Runs the command; its failures become exit statuses, its messages name flags.
int run(const CLI::App& app, const saturate::cli::Action& action) {
  try {
    for (const CLI::App* cmd : app.get_subcommands()) saturate::check_command(cmd->get_name(), saturate::cli::option_values(*cmd));
    return action();
  } catch (const saturate::UsageError& e) {
    // a library error names its option; the command line names the flag that set it, before the
    // message and wherever the message names an option (`global_batch` -> --global-batch)
    const std::string flag = e.option().empty() ? "" : saturate::cli::flag_for_option(e.option()) + ": ";
    std::cerr << "saturate: error: " << flag << saturate::terminal_text(saturate::cli::with_flags(e.what())) << "\n";
    return 2;
  } catch (const saturate::RuntimeFailure& e) {
    std::cerr << "saturate: error: " << saturate::terminal_text(saturate::cli::with_flags(e.what())) << "\n";
    return 1;
  } catch (const saturate::StoppedBySignal& e) {  // before any step: nothing trained; --json says where
    std::cerr << "saturate: " << e.what() << "\n";
    for (const CLI::App* cmd : app.get_subcommands())
      for (const auto& v : saturate::cli::option_values(*cmd))
        if (v.option == "json") saturate::write_stopped_json(cmd->get_name(), v.value, e, std::cout);
    return 128 + e.signal();
  } catch (const saturate::InternalError& e) {
    std::cerr << "saturate: internal error: " << saturate::terminal_text(saturate::cli::with_flags(e.what())) << "\n";
    return 70;  // EX_SOFTWARE
  } catch (const std::exception& e) {  // LibTorch's: the error without its backtraces
    std::cerr << "saturate: error: " << saturate::terminal_text(saturate::cli::with_flags(saturate::torch_error_text(e))) << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  saturate::make_file_size_limit_an_error();  // `ulimit -f`: an error naming the file, not a silent kill
  // before any CPU tensor exists, so that the budget sees every byte.
  saturate::install_cpu_budget_allocator();
  saturate::set_cpu_budget_name("saturate --memory-budget");  // what an allocation past it names
  CLI::App app{"saturate: keep the GPU saturated without running out of memory"};
  app.require_subcommand(1);
  const saturate::BuildInfo& b = saturate::build_info();
  app.set_version_flag("--version", "saturate " + b.version + " (" + b.git_commit + ", " + b.build_type + "), LibTorch " +
                                        b.torch_version + (b.cuda_version.empty() ? "" : ", CUDA " + b.cuda_version));
  saturate::cli::Action action;
  saturate::cli::add_probe_command(app, action);
  saturate::cli::add_search_command(app, action);
  saturate::cli::add_train_command(app, action);
  saturate::cli::add_monitor_command(app, action);
  saturate::cli::add_memory_command(app, action);
  saturate::cli::add_launch_command(app, action);
  saturate::cli::add_report_command(app, action);
  if (refuse_unknown_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string note;  // a flag another subcommand gives its own meaning (one meaning per name)
    for (int i = 2; i < argc && note.empty(); ++i)
      note = saturate::cli::with_flags(saturate::moved_option_note(argv[1], argv[i]));
    std::cerr << "saturate: error: " << e.what() << (note.empty() ? "" : "\n" + note)
              << "\nRun 'saturate --help' or 'saturate COMMAND --help'.\n";
    return 2;
  }
  return run(app, action);
}

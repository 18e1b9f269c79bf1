// saturate monitor: run a command (or attach to a process) and show why the GPU is idle:
// a live line per interval on stderr (like nvidia-smi dmon), every sample in a CSV log, a
// summary at the end, and the child's exit status passed through.
#include <iostream>

#include "commands.h"
#include "monitor_flags.h"
#include "saturate/session/watch_session.h"
#include "saturate/report/monitor_text.h"

namespace saturate::cli {

void add_monitor_flags(CLI::App& app, MonitorSettings& f) {
  add_option_flag(app, "sample_hz", f.sample_hz);
  add_option_flag(app, "trace", f.trace);
  add_option_flag(app, "no_monitor", f.off);
}

void add_monitor_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "monitor", "Run a command (saturate monitor -- COMMAND ...) or watch --pid PID: GPU/CPU utilization live, a summary");
  auto o = std::make_shared<WatchSessionOptions>();
  auto quiet = std::make_shared<bool>(false);
  add_option_flag(*cmd, "watch.sample_hz", o->watch.sample_hz);
  add_option_flag(*cmd, "interval", o->watch.interval_s);
  add_option_flag(*cmd, "log", o->log);
  add_option_flag(*cmd, "pid", o->watch.pid);
  add_option_flag(*cmd, "gpu", o->watch.gpu_index);
  add_option_flag(*cmd, "watch.quiet", *quiet);
  cmd->add_option("command", o->watch.command, "the command to run, after '--'");
  cmd->callback([o, quiet, &action] {
    action = [o, quiet]() -> int {
      if (*quiet) o->watch.interval_s = 0;
      o->watch.on_live_start = [](const std::string& source) { std::cerr << live_header(source) << std::endl; };
      o->watch.on_interval = [](const Sample& s, const std::string& source) {
        std::cerr << live_line(s, source) << std::endl;
      };
      WatchSessionResult r;
      try {
        r = run_watch_session(*o);
      } catch (const SpawnError& e) {
        print_line(std::string("saturate: error: ") + e.what());
        return e.exit_status;
      }
      if (!r.watch.nvml_note.empty())
        print_line("saturate: note: " + r.watch.nvml_note + "; showing CPU and memory from /proc");
      std::cerr << r.text();
      return r.watch.exit_status;
    };
  });
}

}  // namespace saturate::cli

// saturate monitor: run a command (or attach to a process) and show why the GPU is idle:
// a live line per interval on stderr (like nvidia-smi dmon), every sample in a CSV log, a
// summary at the end, and the child's exit status passed through.
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "flag_checks.h"
#include "monitor_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/session/watch_session.h"
#include "saturate/report/monitor_text.h"

namespace saturate::cli {

void add_monitor_flags(CLI::App& app, MonitorFlags& f) {
  add_option_flag(app, "sample_hz", f.sample_hz);
  add_option_flag(app, "trace", f.trace);
  add_option_flag(app, "no_monitor", f.off);
}

std::optional<MonitorOptions> monitor_options(const MonitorFlags& f, const c10::Device& device) {
  if (f.off) {
    if (!f.trace.empty()) throw UsageError("--trace needs the monitor; drop --no-monitor");
    return std::nullopt;
  }
  if (f.sample_hz < 0) throw UsageError(fmt::format("--sample-hz: {} is negative (use e.g. 10, or 0)", f.sample_hz));
  // a bad path is bad input: say so before the work, not after (creating and replacing nothing)
  if (!f.trace.empty()) check_output_path(f.trace, {"--trace", "trace.json"});
  MonitorOptions o;
  o.sample_hz = f.sample_hz;
  o.cuda = device.is_cuda();
  o.device_index = device.has_index() ? device.index() : 0;
  o.trace_path = f.trace;
  return o;
}

std::unique_ptr<MonitorObserver> attach_monitor(const MonitorFlags& f, Probe& probe, const c10::Device& device) {
  const std::optional<MonitorOptions> o = monitor_options(f, device);
  if (!o) return nullptr;
  auto monitor = std::make_unique<MonitorObserver>(*o);
  if (!monitor->nvml_note().empty())
    std::cerr << "saturate: warning: " << monitor->nvml_note() << "; utilization falls back to /proc\n";
  probe.add_observer(monitor.get());
  return monitor;
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

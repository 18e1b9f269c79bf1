// saturate monitor: run a command (or attach to a process) and show why the GPU is idle:
// a live line per interval on stderr (like nvidia-smi dmon), every sample in a CSV log, a
// summary at the end, and the child's exit status passed through.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "flag_checks.h"
#include "monitor_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/monitor/process_monitor.h"
#include "saturate/report/monitor_text.h"

namespace saturate::cli {
namespace {

std::atomic<int> g_child{0};
std::atomic<bool> g_stop{false};

/// SIGTERM/SIGHUP go on to the child; SIGINT from a terminal reaches the child by itself.
/// Either way saturate keeps running until the child ends, to print the summary.
void on_signal(int sig) {
  g_stop.store(true);
  const int child = g_child.load();
  if (child > 0 && sig != SIGINT) kill(child, sig);
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

struct WatchFlags {
  double sample_hz = 10;
  double interval_s = 1;
  std::string log;
  int pid = 0;
  int gpu = 0;
  bool quiet = false;
  std::vector<std::string> command;
};

}  // namespace

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
  auto f = std::make_shared<WatchFlags>();
  add_option_flag(*cmd, "watch.sample_hz", f->sample_hz);
  add_option_flag(*cmd, "interval", f->interval_s);
  add_option_flag(*cmd, "log", f->log);
  add_option_flag(*cmd, "pid", f->pid);
  add_option_flag(*cmd, "gpu", f->gpu);
  add_option_flag(*cmd, "watch.quiet", f->quiet);
  cmd->add_option("command", f->command, "the command to run, after '--'");
  cmd->callback([f, &action] {
    action = [f]() -> int {
      if (f->interval_s < 0) throw UsageError(fmt::format("--interval: {} is negative", f->interval_s));
      std::ofstream log;
      if (!f->log.empty()) {  // written row by row: a FIFO or a device is written, not replaced
        check_output_path(f->log, {"--log", "monitor.csv"});
        log.open(f->log);
        if (!log) throw UsageError(fmt::format("--log {}: cannot open for writing; give a file path you can write", f->log));
        if (!(log << csv_header() << "\n" << std::flush))
          throw RuntimeFailure(fmt::format("--log {}: writing failed (a full disk, or the file size limit, ulimit -f)", f->log));
      }
      WatchOptions o;
      o.command = f->command;
      o.pid = f->pid;
      o.sample_hz = f->sample_hz;
      o.interval_s = f->quiet ? 0 : f->interval_s;
      o.gpu_index = f->gpu;
      o.on_live_start = [](const std::string& source) { std::cerr << live_header(source) << std::endl; };
      o.on_interval = [](const Sample& s, const std::string& source) { std::cerr << live_line(s, source) << std::endl; };
      if (log.is_open()) o.on_sample = [&log](const Sample& s, const std::string& source) {
        log << csv_row(s, source) << "\n" << std::flush;  // a killed run keeps its rows
      };
      o.stop = &g_stop;
      o.child_pid = &g_child;
      install_handlers();
      WatchResult r;
      try {
        r = watch_process(o);
      } catch (const SpawnError& e) {
        std::cerr << "saturate: error: " << with_flags(e.what()) << "\n";
        return e.exit_status;
      }
      if (!r.nvml_note.empty()) std::cerr << "saturate: note: " << r.nvml_note << "; showing CPU and memory from /proc\n";
      const std::string what = f->pid > 0 ? fmt::format("pid {}", f->pid) : f->command[0];
      std::cerr << fmt::format("saturate: {} {} after {:.1f} s\n", what, r.how_it_ended, r.seconds)
                << summary_text(r.summary);
      return r.exit_status;
    };
  });
}

}  // namespace saturate::cli

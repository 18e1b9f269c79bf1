#include "saturate/session/watch_session.h"

#include <fstream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/output_file.h"
#include "saturate/core/stop_signals.h"
#include "saturate/report/monitor_text.h"

namespace saturate {

void WatchSessionOptions::check() const {
  check_option_range("interval", watch.interval_s);
  check_option_range("watch.sample_hz", watch.sample_hz);
  if (watch.pid != 0) check_option_range("pid", watch.pid);
  check_option_range("gpu", watch.gpu_index);
  // written row by row: a FIFO or a device is written, not replaced
  if (!log.empty()) check_output_path(log, {"`log`", "monitor.csv"});
}

std::string WatchSessionResult::text() const {
  return fmt::format("saturate: {} {} after {:.1f} s\n", what, watch.how_it_ended, watch.seconds) +
         summary_text(watch.utilization) +
         fmt::format("bottleneck {}: {}\nfix        {}\n", watch.verdict.verdict, watch.verdict.reason, watch.verdict.fix);
}

WatchSessionResult run_watch_session(WatchSessionOptions o) {
  o.check();
  std::ofstream log;
  if (!o.log.empty()) {
    log.open(o.log);
    if (!log) throw UsageError(fmt::format("`log` {}: cannot open for writing; give a file path you can write", o.log));
    if (!(log << csv_header() << "\n" << std::flush))
      throw RuntimeFailure(fmt::format("`log` {}: writing failed (a full disk, or the file size limit, ulimit -f)",
                                       o.log));
    o.watch.on_sample = [&log](const Sample& s, const std::string& source) {
      log << csv_row(s, source) << "\n" << std::flush;  // a killed run keeps its rows
    };
  }
  std::atomic<int> child{0};
  // the child gets SIGTERM and SIGHUP; the watcher keeps on until it ends, to give the summary
  const StopSignals signals({nullptr, /*second_stops_at_once=*/false, &child});
  o.watch.stop = &signals.stopping();
  o.watch.child_pid = &child;
  WatchSessionResult r;
  r.watch = watch_process(o.watch);
  r.what = o.watch.pid > 0 ? fmt::format("pid {}", o.watch.pid) : o.watch.command.at(0);
  return r;
}

}  // namespace saturate

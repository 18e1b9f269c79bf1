#include "saturate/monitor/process_monitor.h"

#include <signal.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "monitor/external_verdict.h"
#include "saturate/monitor/proc_stats.h"

namespace saturate {
namespace {

using Clock = std::chrono::steady_clock;

void check_watch_options(const WatchOptions& o) {
  if (o.command.empty() && o.pid <= 0)
    throw UsageError("monitor: nothing to watch; give a command after '--' (saturate monitor -- python train.py) or "
                     "`pid` PID");
  if (!o.command.empty() && o.pid > 0)
    throw UsageError("monitor: give either a command or `pid`, not both");
  if (o.sample_hz <= 0) throw UsageError("sample_hz", fmt::format("{} must be positive (e.g. 10)", o.sample_hz));
  if (o.pid > 0 && !process_alive(o.pid))
    throw UsageError(fmt::format("`pid` {}: no such running process", o.pid));
}

// Whether the watched job has ended: an attached process gone (or the watch told to stop), or
// the spawned child exited, seen without reaping it, so that a last sample still reads the
// child's final CPU time.
bool job_ended(bool attached, int pid, const std::atomic<bool>* stop) {
  if (attached) return !process_alive(pid) || (stop && stop->load());
  siginfo_t info{};
  info.si_pid = 0;
  const int rc = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  return (rc == 0 && info.si_pid == pid) || (rc != 0 && errno != EINTR);
}

}  // namespace

WatchResult watch_process(const WatchOptions& o) {
  check_watch_options(o);
  WatchResult result;
  const auto start = Clock::now();
  const bool attached = o.pid > 0;
  ChildOptions child;
  child.command = o.command;
  child.who = "monitor";
  const int pid = attached ? o.pid : static_cast<int>(spawn_child(child));
  if (o.child_pid && !attached) o.child_pid->store(pid);

  SamplerOptions so;
  so.sample_hz = o.sample_hz;
  so.pid = pid;
  so.include_descendants = true;
  so.use_nvml = true;
  so.gpu_index = o.gpu_index;
  so.nvml_path = o.nvml_path;
  std::string source;
  if (o.on_sample) so.on_sample = [&](const Sample& s) { o.on_sample(s, source); };
  Sampler sampler(so);
  source = sampler.source();
  result.source = source;
  result.nvml_note = sampler.nvml_note();
  sampler.start();
  if (o.on_live_start && o.interval_s > 0) o.on_live_start(source);

  // the CPUs the job may run on (taskset, a launcher's pinning): its verdict's cores, read while
  // it runs (a wrapper such as taskset sets them just before it execs the job)
  int job_cpus = allowed_cpus(pid);
  auto next_line = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval_s));
  int status = 0;
  while (!job_ended(attached, pid, o.stop)) {
    if (const int n = allowed_cpus(pid)) job_cpus = n;
    if (o.on_interval && o.interval_s > 0 && Clock::now() >= next_line) {
      Sample s;
      if (sampler.latest(&s)) o.on_interval(s, source);
      next_line += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sampler.sample_now();
  sampler.stop();
  if (!attached) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (o.child_pid) o.child_pid->store(0);
    const ChildExit e = child_exit(status);
    result.exit_status = e.exit_status;
    result.how_it_ended = e.signaled ? "killed by signal " + std::to_string(e.signal) + " (" + strsignal(e.signal) + ")"
                                     : e.how;
  } else {
    result.how_it_ended = process_alive(pid) ? "still running (stopped watching)" : "ended";
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.utilization = summarize_utilization(sampler.samples(), source, o.sample_hz, SteadyClock::time_point::min(),
                                             SteadyClock::time_point::max());
  result.verdict = external_job_verdict(
      result.utilization, job_cpus > 0 ? job_cpus : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return result;
}

}  // namespace saturate

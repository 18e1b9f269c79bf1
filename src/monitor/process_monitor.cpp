#include "saturate/monitor/process_monitor.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "saturate/monitor/proc_stats.h"

extern char** environ;

namespace saturate {
namespace {

using Clock = std::chrono::steady_clock;

int spawn(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // the child gets default signal dispositions, whatever handlers the caller installed.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigfillset(&all);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    const bool not_found = rc == ENOENT || rc == ENOTDIR;
    throw SpawnError(fmt::format("monitor: cannot run '{}': {}{}", command[0], std::strerror(rc),
                                 not_found ? " (not found in PATH)" : ""),
                     not_found ? 127 : 126);
  }
  return static_cast<int>(pid);
}

}  // namespace

WatchResult watch_process(const WatchOptions& o) {
  if (o.command.empty() && o.pid <= 0)
    throw UsageError("monitor: nothing to watch; give a command after '--' (saturate monitor -- python train.py) or "
                     "--pid PID");
  if (!o.command.empty() && o.pid > 0)
    throw UsageError("monitor: give either a command or --pid, not both");
  if (o.sample_hz <= 0) throw UsageError(fmt::format("--sample-hz: {} must be positive (e.g. 10)", o.sample_hz));
  if (o.pid > 0 && !process_alive(o.pid))
    throw UsageError(fmt::format("--pid {}: no such running process", o.pid));

  WatchResult result;
  const auto start = Clock::now();
  const bool attached = o.pid > 0;
  const int pid = attached ? o.pid : spawn(o.command);
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
  if (o.on_line && o.interval_s > 0) o.on_line(live_header(source));

  auto next_line = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval_s));
  int status = 0;
  bool ended = false;
  while (!ended) {
    if (attached) {
      ended = !process_alive(pid) || (o.stop && o.stop->load());
    } else {
      // wait without reaping, so that a last sample still reads the child's final CPU time.
      siginfo_t info{};
      info.si_pid = 0;
      const int rc = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rc == 0 && info.si_pid == pid) ended = true;
      if (rc != 0 && errno != EINTR) ended = true;
    }
    if (ended) break;
    if (o.on_line && o.interval_s > 0 && Clock::now() >= next_line) {
      Sample s;
      if (sampler.latest(&s)) o.on_line(live_line(s, source));
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
    if (WIFEXITED(status)) {
      result.exit_status = WEXITSTATUS(status);
      result.how_it_ended = fmt::format("exited with status {}", result.exit_status);
    } else if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      result.exit_status = 128 + sig;
      result.how_it_ended = fmt::format("killed by signal {} ({})", sig, strsignal(sig));
    }
  } else {
    result.how_it_ended = process_alive(pid) ? "still running (stopped watching)" : "ended";
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.summary = summarize_samples(sampler.samples(), source, o.sample_hz);
  return result;
}

}  // namespace saturate

// spawn_child: fork, then in the child: its own process group (optional), die with the parent,
// default signals and mask, stderr, exec. An exec failure goes back to the parent through a
// close-on-exec pipe (nothing arrives when exec succeeds).
#include "saturate/core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

extern char** environ;

namespace saturate {

pid_t spawn_child(const ChildOptions& o) {
  if (o.command.empty() || o.command[0].empty())
    throw UsageError(fmt::format("{}: no command to run", o.who));
  // everything the child needs is built before fork: it only calls async-signal-safe functions
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : o.extra_env) vars[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o.command;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) throw RuntimeFailure(fmt::format("{}: pipe: {}", o.who, std::strerror(errno)));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    close(report[0]);
    close(report[1]);
    throw RuntimeFailure(fmt::format("{}: cannot start '{}': fork: {}", o.who, o.command[0], why));
  }
  if (pid == 0) {
    close(report[0]);
    if (o.own_process_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(137);  // the parent died before prctl
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (o.stderr_fd >= 0) dup2(o.stderr_fd, 2);
    execvpe(argv[0], argv.data(), envp.data());
    const int err = errno;
    (void)!write(report[1], &err, sizeof(err));
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
  }
  if (o.own_process_group) setpgid(pid, pid);  // also here: no race with a kill of the group
  close(report[1]);
  int err = 0;
  ssize_t n;
  while ((n = read(report[0], &err, sizeof(err))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const bool not_found = err == ENOENT || err == ENOTDIR;
    throw SpawnError(fmt::format("{}: cannot run '{}': {}{}", o.who, o.command[0], std::strerror(err),
                                 not_found ? " (not found in PATH)" : ""),
                     not_found ? 127 : 126);
  }
  return pid;
}

ChildExit child_exit(int wait_status) {
  ChildExit e;
  if (WIFSIGNALED(wait_status)) {
    e.signaled = true;
    e.signal = WTERMSIG(wait_status);
    e.exit_status = 128 + e.signal;
    e.how = fmt::format("was killed by signal {} ({})", e.signal, strsignal(e.signal));
  } else {
    e.exit_status = WEXITSTATUS(wait_status);
    e.how = fmt::format("exited with status {}", e.exit_status);
  }
  return e;
}

}  // namespace saturate

// `saturate launch`: start the ranks, prefix their stderr, forward signals, stop all on a
// failure (see dist/launch.h). POSIX only, no LibTorch.
#include "saturate/dist/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "saturate/core/child_process.h"
#include "saturate/core/errors.h"
#include "saturate/dist/env.h"

namespace saturate {
namespace {

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

void on_signal(int sig) {
  const unsigned char s = static_cast<unsigned char>(sig);
  const int saved = errno;
  g_signals.fetch_add(1);
  (void)!write(g_signal_pipe[1], &s, 1);
  errno = saved;
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int err_fd = -1;
  std::string pending;  // a partial stderr line
  bool running = true;
  RankExit exit;
};

using Clock = std::chrono::steady_clock;

}  // namespace

int max_ranks_per_node() {
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const long long memory_ranks = pages > 0 && page > 0 ? static_cast<long long>(pages) * page / (256LL << 20) : 1 << 20;
  return static_cast<int>(std::max(1LL, std::min<long long>(4 * cores, memory_ranks)));
}

void check_launch_options(const LaunchOptions& o) {
  if (o.nproc_per_node < 1)
    throw UsageError("nproc_per_node", fmt::format("{} is not a positive count of processes", o.nproc_per_node));
  const int limit = max_ranks_per_node();
  if (o.nproc_per_node > limit)
    throw UsageError("nproc_per_node", fmt::format("{} is more processes than this machine can run (at most {}: 4 per "
                                 "core on {} cores, and at most one per 256 MiB of its memory); give one per GPU or "
                                 "a few per node",
                                 o.nproc_per_node, limit, sysconf(_SC_NPROCESSORS_ONLN)));
  if (!(o.kill_grace_s >= 0 && o.kill_grace_s <= 3600))
    throw UsageError("kill_grace", fmt::format("{} s is outside 0..3600 (seconds between SIGTERM and SIGKILL when a "
                                 "rank failed)",
                                 o.kill_grace_s));
  if (o.nnodes < 1) throw UsageError("nnodes", fmt::format("{} is not a positive count of nodes", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw UsageError(fmt::format("`node_rank`: {} is outside 0..{} (`nnodes` {}); number the nodes from 0",
                                 o.node_rank, o.nnodes - 1, o.nnodes));
  if (o.master_port < 0 || o.master_port > 65535)
    throw UsageError("master_port", fmt::format("{} is not a TCP port (expected 1..65535, or 0 for a free one on "
                                 "one node)",
                                 o.master_port));
  if (o.nnodes > 1 && o.master_port == 0)
    throw UsageError(fmt::format("`master_port`: needed with `nnodes` {} (every node must agree on it), e.g. "
                                 "`master_port` 29500",
                                 o.nnodes));
  if (o.nnodes > 1 && is_loopback_address(o.master_addr))
    throw UsageError(fmt::format("`master_addr`: {} is this machine's loopback but `nnodes` {} spans machines; "
                                 "give the host name or address of node 0",
                                 o.master_addr, o.nnodes));
  if (o.command.empty())
    throw UsageError("launch: no command to run (expected `saturate launch [options] -- COMMAND ARGS...`)");
}

std::map<std::string, std::string> rank_environment(const LaunchOptions& o, int local_rank, int master_port) {
  const int world = o.nnodes * o.nproc_per_node;
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},
  };
  // as torchrun: several ranks on a node share its cores
  if (o.nproc_per_node > 1 && !std::getenv("OMP_NUM_THREADS")) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    env["OMP_NUM_THREADS"] = std::to_string(std::max<long>(1, cores / o.nproc_per_node));
  }
  for (const auto& [k, v] : o.extra_env) env[k] = v;
  return env;
}

int free_port(const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RuntimeFailure(fmt::format("launch: cannot open a socket: {}", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    throw RuntimeFailure(fmt::format("launch: cannot find a free port on {}: {}; give `master_port`", host, why));
  }
  close(fd);
  return ntohs(a.sin_port);
}

std::string rank_prefix(int rank, int world_size, const std::string& host) {
  return fmt::format("[rank {}/{} {}] ", rank, world_size, host);
}

namespace {

/// One launch on this node: the signal handlers it installed, the ranks it started, and how it
/// stops them (a failed rank stops the others: SIGTERM, then SIGKILL after kill_grace_s).
class NodeLaunch {
 public:
  NodeLaunch(const LaunchOptions& o, const LaunchSinks& sinks, LaunchResult& result)
      : o_(o), sinks_(sinks), result_(result) {}
  /// Forwarded signals (SIGINT, SIGTERM, SIGHUP) write to the pipe the loop polls.
  void install_signals();
  /// The handlers as they were; the signal pipe closed.
  void restore_signals();
  /// Starts this node's ranks; false when one could not start (those started are killed and the
  /// result names the one that failed, as a rank's failure would).
  bool start_ranks();
  /// Until every rank exited: their stderr lines prefixed, signals forwarded, ranks reaped.
  void supervise();
  /// What is left of the ranks' stderr flushed; every rank's exit in the result.
  void collect();
  int forwarded() const { return forwarded_; }
  size_t rank_count() const { return children_.size(); }

 private:
  void note(const std::string& s) const {
    if (sinks_.note) sinks_.note(s);
  }
  void flush_line(const Child& c, const std::string& line) const {
    if (sinks_.rank_line) sinks_.rank_line(c.rank, line);
  }
  void stop_all(int sig) {
    for (Child& c : children_)
      if (c.running) kill(-c.pid, sig);
  }
  void spawn_failed(int local, const SpawnError& e);
  void read_err(Child& c);
  void read_signals();
  void reap();

  const LaunchOptions& o_;
  const LaunchSinks& sinks_;
  LaunchResult& result_;
  struct sigaction old_[3];
  std::vector<Child> children_;
  bool stopping_ = false;
  Clock::time_point kill_at_{};
  bool killed_ = false;
  int forwarded_ = 0;  // the first signal forwarded: ranks that exit 128 + it stopped as asked
  int signals_ = 0;
};

void NodeLaunch::install_signals() {
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(kForwarded[i], &sa, &old_[i]);
  }
}

void NodeLaunch::restore_signals() {
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_[i], nullptr);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

bool NodeLaunch::start_ranks() {
  g_signals.store(0);
  for (int local = 0; local < o_.nproc_per_node; ++local) {
    if (g_signals.load() > 0) break;  // stopped while starting: the ranks started get the signal later
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw RuntimeFailure(fmt::format("launch: pipe: {}", std::strerror(errno)));
    ChildOptions co;
    co.command = o_.command;
    co.extra_env = rank_environment(o_, local, result_.master_port);
    co.own_process_group = true;
    co.stderr_fd = p[1];
    co.who = "launch";
    pid_t pid = -1;
    try {
      pid = spawn_child(co);
    } catch (const SpawnError& e) {  // nothing runs: stop the ranks started, report as a rank would
      close(p[0]);
      close(p[1]);
      spawn_failed(local, e);
      return false;
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    Child c;
    c.rank = o_.node_rank * o_.nproc_per_node + local;
    c.pid = pid;
    c.err_fd = p[0];
    c.exit.rank = c.rank;
    c.exit.pid = pid;
    children_.push_back(std::move(c));
  }
  return true;
}

void NodeLaunch::spawn_failed(int local, const SpawnError& e) {
  for (Child& c : children_) {
    kill(-c.pid, SIGKILL);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (c.err_fd >= 0) close(c.err_fd);
    c.exit.exit_status = 137;
    c.exit.signaled = true;
    c.exit.signal = SIGKILL;
    c.exit.stopped_by_launcher = true;
    result_.ranks.push_back(c.exit);
  }
  const int rank = o_.node_rank * o_.nproc_per_node + local;
  if (sinks_.rank_line) sinks_.rank_line(rank, e.what());
  RankExit failed;
  failed.rank = rank;
  failed.exit_status = e.exit_status;
  result_.ranks.push_back(failed);
  result_.failed_rank = rank;
  result_.exit_status = e.exit_status;
  result_.summary = fmt::format("rank {} could not start: {}", rank, e.what());
}

void NodeLaunch::read_err(Child& c) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(c.err_fd, buf, sizeof(buf));
    if (n > 0) {
      c.pending.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = c.pending.find('\n')) != std::string::npos) {
        flush_line(c, c.pending.substr(0, nl));
        c.pending.erase(0, nl + 1);
      }
      continue;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      if (!c.pending.empty()) flush_line(c, c.pending);
      c.pending.clear();
      close(c.err_fd);
      c.err_fd = -1;
    }
    return;
  }
}

void NodeLaunch::read_signals() {
  unsigned char s;
  while (read(g_signal_pipe[0], &s, 1) == 1) {
    // the first and second are forwarded (a saturate rank checkpoints on the first and stops at
    // once on the second); the third kills every rank
    ++signals_;
    if (signals_ >= 3) {
      note(fmt::format("launch: received signal {} ({}) a third time; killing the ranks", static_cast<int>(s),
                       strsignal(s)));
      stop_all(SIGKILL);
      killed_ = true;
      continue;
    }
    note(fmt::format("launch: received signal {} ({}); forwarding it to the ranks{}", static_cast<int>(s),
                     strsignal(s), signals_ == 1 ? " (send it again to stop them at once)" : ""));
    stop_all(s);
    if (forwarded_ == 0) forwarded_ = s;
  }
}

void NodeLaunch::reap() {
  for (Child& c : children_) {
    if (!c.running) continue;
    int status = 0;
    const pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r != c.pid) continue;
    c.running = false;
    const ChildExit how = child_exit(status);
    c.exit.signaled = how.signaled;
    c.exit.signal = how.signal;
    c.exit.exit_status = how.exit_status;
    c.exit.stopped_by_launcher = stopping_ && result_.failed_rank != c.rank;
    kill(-c.pid, SIGKILL);  // whatever the rank left behind in its group
    // a rank that stopped on the forwarded signal (its exit code, or the signal itself) did as
    // asked: the others got the same signal and are stopping too
    const bool as_asked = forwarded_ != 0 && c.exit.exit_status == 128 + forwarded_;
    if (as_asked && result_.exit_status == 0) result_.exit_status = c.exit.exit_status;
    if (c.exit.exit_status != 0 && result_.failed_rank < 0 && !as_asked) {
      result_.failed_rank = c.rank;
      result_.exit_status = c.exit.exit_status;
      c.exit.stopped_by_launcher = false;
      result_.summary = fmt::format("rank {} (pid {}) {}", c.rank, c.pid, how.how);
      bool others = false;
      for (const Child& d : children_) others = others || d.running;
      note(fmt::format("launch: {}{}", result_.summary, others ? "; stopping the other ranks" : ""));
      if (!stopping_) {
        stopping_ = true;
        stop_all(SIGTERM);
        kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o_.kill_grace_s * 1000));
      }
    }
  }
}

void NodeLaunch::supervise() {
  Clock::time_point all_exited_at{};
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    owners.push_back(nullptr);
    for (Child& c : children_)
      if (c.err_fd >= 0) {
        fds.push_back({c.err_fd, POLLIN, 0});
        owners.push_back(&c);
      }
    poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!owners[i]) read_signals();
      else read_err(*owners[i]);
    }
    reap();
    bool any_running = false, any_open = false;
    for (const Child& c : children_) {
      any_running = any_running || c.running;
      any_open = any_open || c.err_fd >= 0;
    }
    if (stopping_ && !killed_ && any_running && Clock::now() >= kill_at_) {
      note(fmt::format("launch: ranks still running {:.0f} s after SIGTERM; sending SIGKILL", o_.kill_grace_s));
      stop_all(SIGKILL);
      killed_ = true;
    }
    if (!any_running) {
      if (all_exited_at == Clock::time_point{}) all_exited_at = Clock::now();
      // a descendant may hold a stderr pipe open: give up on it after a moment
      if (!any_open || Clock::now() - all_exited_at > std::chrono::seconds(1)) break;
    }
  }
}

void NodeLaunch::collect() {
  for (Child& c : children_) {
    if (c.err_fd >= 0) {
      if (!c.pending.empty()) flush_line(c, c.pending);
      close(c.err_fd);
    }
    result_.ranks.push_back(c.exit);
  }
}

}  // namespace

LaunchResult launch(const LaunchOptions& o, const LaunchSinks& sinks) {
  check_launch_options(o);
  LaunchResult result;
  result.master_port = o.master_port ? o.master_port : free_port(o.master_addr);
  const int world = o.nnodes * o.nproc_per_node;
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw RuntimeFailure(fmt::format("launch: pipe: {}", std::strerror(errno)));
  NodeLaunch launcher(o, sinks, result);
  launcher.install_signals();
  if (!launcher.start_ranks()) {
    launcher.restore_signals();
    return result;
  }
  launcher.supervise();
  launcher.collect();
  launcher.restore_signals();
  const int forwarded = launcher.forwarded();
  const size_t ranks = launcher.rank_count();
  if (result.failed_rank < 0 && forwarded != 0)
    result.summary = fmt::format("{} rank{} stopped on signal {} ({})", ranks, ranks == 1 ? "" : "s", forwarded,
                                 strsignal(forwarded));
  else if (result.failed_rank < 0)
    result.summary = fmt::format("{} rank{} finished", world == o.nproc_per_node ? world : o.nproc_per_node,
                                 o.nproc_per_node == 1 ? "" : "s");
  return result;
}

}  // namespace saturate

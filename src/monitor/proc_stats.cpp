#include "saturate/monitor/proc_stats.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <time.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace saturate {
namespace {

struct StatLine {
  int ppid = 0;
  char state = '?';
  double cpu_time_s = 0;
  int64_t rss_pages = 0;
  bool ok = false;
};

/// /proc/PID/stat; the command name may hold spaces and parentheses, so parse after the last ')'.
StatLine read_stat(int pid) {
  StatLine s;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return s;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(line.substr(close + 2));
  // fields from 3 on: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  if (f.size() < 22) return s;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  s.state = f[0].empty() ? '?' : f[0][0];
  s.ppid = std::atoi(f[1].c_str());
  const double jiffies = std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr) +
                         std::strtod(f[13].c_str(), nullptr) + std::strtod(f[14].c_str(), nullptr);
  s.cpu_time_s = jiffies / ticks;
  s.rss_pages = std::atoll(f[21].c_str());
  s.ok = true;
  return s;
}

std::map<int, int> parent_map() {
  std::map<int, int> parent;
  DIR* dir = opendir("/proc");
  if (!dir) return parent;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end != '\0' || pid <= 0) continue;
    const StatLine s = read_stat(static_cast<int>(pid));
    if (s.ok) parent[static_cast<int>(pid)] = s.ppid;
  }
  closedir(dir);
  return parent;
}

}  // namespace

std::vector<int> process_tree(int root) {
  std::vector<int> tree{root};
  const std::map<int, int> parent = parent_map();
  // breadth-first over the parent links; a pid list is small, quadratic is fine.
  for (size_t i = 0; i < tree.size(); ++i)
    for (const auto& [pid, ppid] : parent)
      if (ppid == tree[i] && pid != root) tree.push_back(pid);
  return tree;
}

bool process_alive(int pid) {
  const StatLine s = read_stat(pid);
  return s.ok && s.state != 'Z' && s.state != 'X';
}

ProcUsage read_proc_usage(int pid, bool include_descendants) {
  static const int64_t page = sysconf(_SC_PAGESIZE);
  ProcUsage u;
  if (pid == getpid() && !include_descendants) {
    // this process: getrusage has microseconds where /proc/self/stat has 10 ms ticks.
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    u.cpu_time_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    const StatLine s = read_stat(pid);
    u.rss_bytes = s.rss_pages * page;
    u.alive = true;
    return u;
  }
  const std::vector<int> pids = include_descendants ? process_tree(pid) : std::vector<int>{pid};
  for (int p : pids) {
    const StatLine s = read_stat(p);
    if (!s.ok) continue;
    if (p == pid) u.alive = s.state != 'Z' && s.state != 'X';
    u.cpu_time_s += s.cpu_time_s;
    u.rss_bytes += s.rss_pages * page;
  }
  return u;
}

namespace {

/// Every CPU's busy seconds since boot, from /proc/stat's first line; -1 when unreadable.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return -1;
  if (!(in >> steal)) steal = 0;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (user + nice + system + irq + softirq + steal) / ticks;
}

double clock_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

OthersCpuMeter::OthersCpuMeter()
    : machine_busy_s_(machine_busy_seconds()),
      own_s_(clock_seconds(CLOCK_PROCESS_CPUTIME_ID)),
      wall_s_(clock_seconds(CLOCK_MONOTONIC)) {}

double OthersCpuMeter::elapsed_s() const { return clock_seconds(CLOCK_MONOTONIC) - wall_s_; }

int allowed_cpus(int pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(pid, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

CpuThreads choose_cpu_threads(const OthersCpuMeter& others, int most, double min_sample_s) {
  CpuThreads c;
  most = std::max(1, most);
  const double left = min_sample_s - others.elapsed_s();
  if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
  c.sample_s = others.elapsed_s();
  c.others_busy_cpus = others.busy_cpus();
  c.allowed_cpus = allowed_cpus(0);
  const int cpus = c.allowed_cpus > 0 ? c.allowed_cpus : most;
  if (c.others_busy_cpus < 0) {
    c.threads = most;
    c.reason = fmt::format("LibTorch's {} (the machine's load could not be read)", most);
    return c;
  }
  const int free_cpus = static_cast<int>(std::lround(static_cast<double>(cpus) - c.others_busy_cpus));
  // under three quarters of a CPU is a blip (a process starting or ending: 0.7 was read once on
  // a quiet machine over 0.1 s), not a load to give cores up for
  c.threads = c.others_busy_cpus < 0.75 ? most : std::clamp(free_cpus, 1, most);
  c.reason = c.threads == most
                 ? fmt::format("LibTorch's {}: {:.1f} of {} CPUs busy with other processes (over {:.2f} s)", most,
                               c.others_busy_cpus, cpus, c.sample_s)
                 : fmt::format("{} of {} CPUs: {:.1f} busy with other processes (over {:.2f} s); all {} would "
                               "compete with them",
                               c.threads, cpus, c.others_busy_cpus, c.sample_s, most);
  return c;
}

double OthersCpuMeter::busy_cpus() const {
  const double busy = machine_busy_seconds(), wall = clock_seconds(CLOCK_MONOTONIC) - wall_s_;
  if (machine_busy_s_ < 0 || busy < 0 || wall <= 0) return -1;
  const double own = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - own_s_;
  return std::max(0.0, (busy - machine_busy_s_ - own) / wall);
}

}  // namespace saturate

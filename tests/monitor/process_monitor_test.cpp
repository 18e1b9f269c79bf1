// saturate monitor's engine: running a command, attaching to a process, exit statuses.
#include "saturate/monitor/process_monitor.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "monitor_test_paths.h"
#include "support/support.h"

extern char** environ;

namespace saturate {
namespace {

WatchOptions run(std::vector<std::string> command) {
  WatchOptions o;
  o.command = std::move(command);
  o.sample_hz = 20;
  o.interval_s = 0.1;
  o.nvml_path = "/nonexistent/libnvidia-ml.so.1";
  return o;
}

TEST(ProcessMonitorTest, ChildExitStatusIsPassedThrough) {
  const WatchResult r = watch_process(run({"sh", "-c", "sleep 0.2; exit 3"}));
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.how_it_ended, "exited with status 3");
  EXPECT_EQ(r.source, "proc");
  EXPECT_GE(r.utilization.samples, 2);
}

TEST(ProcessMonitorTest, DeathBySignalIs128PlusTheSignal) {
  const WatchResult r = watch_process(run({"sh", "-c", "kill -TERM $$"}));
  EXPECT_EQ(r.exit_status, 128 + SIGTERM);
  EXPECT_NE(r.how_it_ended.find("killed by signal 15"), std::string::npos) << r.how_it_ended;
}

TEST(ProcessMonitorTest, MissingCommandIsExitStatus127) {
  try {
    watch_process(run({"saturate-no-such-command"}));
    FAIL() << "expected SpawnError";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.exit_status, 127);
    EXPECT_NE(std::string(e.what()).find("cannot run 'saturate-no-such-command'"), std::string::npos) << e.what();
  }
}

TEST(ProcessMonitorTest, NothingToWatchIsAUsageError) {
  ASSERT_THROWS_WITH(watch_process(WatchOptions{}), UsageError, "give a command after '--'");
  WatchOptions o;
  o.pid = 2147483;
  ASSERT_THROWS_WITH(watch_process(o), UsageError, "`pid` 2147483: no such running process");
}

TEST(ProcessMonitorTest, LiveSamplesAndEverySampleReachTheCallerWithNvml) {
  WatchOptions o = run({"sh", "-c", "sleep 0.35"});
  o.nvml_path = SATURATE_FAKE_NVML;
  std::vector<std::string> starts;
  int intervals = 0, samples = 0;
  o.on_live_start = [&](const std::string& source) { starts.push_back(source); };
  o.on_interval = [&](const Sample& s, const std::string& source) {
    EXPECT_EQ(starts.size(), 1u);  // the start comes first, once
    EXPECT_EQ(source, "nvml");
    EXPECT_EQ(s.gpu_util_percent, 42);
    ++intervals;
  };
  o.on_sample = [&](const Sample& s, const std::string& source) {
    EXPECT_EQ(source, "nvml");
    EXPECT_EQ(s.gpu_util_percent, 42);
    ++samples;
  };
  const WatchResult r = watch_process(o);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.source, "nvml");
  EXPECT_EQ(starts, std::vector<std::string>{"nvml"});
  EXPECT_GE(intervals, 1);  // every 0.1 s over 0.35 s
  EXPECT_GE(samples, 2);
  ASSERT_NE(r.utilization.field("gpu_util_percent"), nullptr);
  EXPECT_EQ(r.utilization.field("gpu_util_percent")->mean, 42.0);
}

TEST(ProcessMonitorTest, AttachWatchesARunningProcessUntilItEnds) {
  pid_t pid = 0;
  char sh[] = "sh", c[] = "-c", cmd[] = "sleep 0.3";
  char* argv[] = {sh, c, cmd, nullptr};
  ASSERT_EQ(posix_spawnp(&pid, "sh", nullptr, nullptr, argv, environ), 0);
  // reap it as soon as it ends, as its real parent would, so that it leaves /proc
  std::thread reaper([pid] { waitpid(pid, nullptr, 0); });
  WatchOptions o;
  o.pid = pid;
  o.sample_hz = 20;
  o.nvml_path = "/nonexistent/libnvidia-ml.so.1";
  const WatchResult r = watch_process(o);
  reaper.join();
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.how_it_ended, "ended");
  EXPECT_GE(r.seconds, 0.1);
  EXPECT_GE(r.utilization.samples, 2);
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(ProcessMonitorTest, AMonitorKilledBySigkillTakesItsChildWithIt) {
  const std::string dir = testing::temp_dir("monitor_pdeathsig");
  const std::string pid_file = dir + "/child.pid";
  const pid_t monitor = fork();
  if (monitor == 0) {
    freopen("/dev/null", "w", stderr);
    execl(SATURATE_BINARY, SATURATE_BINARY, "monitor", "-q", "--", "sh", "-c",
          ("echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + " && exec sleep 120").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  pid_t child = 0;
  for (int i = 0; i < 6000 && child == 0; ++i) {  // start-up is slow on a loaded machine
    std::ifstream in(pid_file);
    if (!(in >> child)) child = 0;
    if (child == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(child, 0) << "the child never started";
  ASSERT_TRUE(alive(child));
  kill(monitor, SIGKILL);
  int status = 0;
  waitpid(monitor, &status, 0);
  // the child (reparented, so not ours to reap) goes away with the monitor
  bool gone = false;
  for (int i = 0; i < 3000 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    gone = !stat.good() || (close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z');
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "child " << child << " still runs after its monitor was killed";
  if (!gone) kill(child, SIGKILL);
}

}  // namespace
}  // namespace saturate

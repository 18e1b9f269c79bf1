// saturate launch's library: torchrun's environment, prefixes, failures and signals, with
// real child processes (sh) and no LibTorch.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "saturate/core/errors.h"
#include "saturate/dist/launch.h"
#include "support/support.h"

namespace saturate {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> lines;
  std::vector<std::string> notes;
  LaunchSinks sinks() {
    LaunchSinks s;
    s.rank_line = [this](int r, const std::string& l) {
      std::lock_guard<std::mutex> g(mu);
      lines.emplace_back(r, l);
    };
    s.note = [this](const std::string& l) {
      std::lock_guard<std::mutex> g(mu);
      notes.push_back(l);
    };
    return s;
  }
  bool has(int rank, const std::string& text) {
    for (auto& [r, l] : lines)
      if (r == rank && l.find(text) != std::string::npos) return true;
    return false;
  }
};

TEST(LaunchTest, RanksGetTorchrunsEnvironment) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  o.master_port = 29555;
  o.command = {"sh", "-c", "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR:$MASTER_PORT\" >&2"};
  Captured c;
  const LaunchResult r = launch(o, c.sinks());
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.failed_rank, -1);
  EXPECT_TRUE(c.has(2, "2 4 0 2 1 10.0.0.1:29555"));
  EXPECT_TRUE(c.has(3, "3 4 1 2 1 10.0.0.1:29555"));
  ASSERT_EQ(r.ranks.size(), 2u);
}

TEST(LaunchTest, AFailingRankStopsTheOthersAndItsStatusIsReturned) {
  LaunchOptions o;
  o.nproc_per_node = 3;
  o.command = {"sh", "-c", "if [ \"$RANK\" = 1 ]; then echo boom >&2; exit 3; fi; echo waiting >&2; exec sleep 60"};
  Captured c;
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult r = launch(o, c.sinks());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 20.0);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_TRUE(c.has(1, "boom"));
  EXPECT_NE(r.summary.find("rank 1 (pid"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("exited with status 3"), std::string::npos) << r.summary;
  for (const RankExit& e : r.ranks)
    if (e.rank != 1) {
      EXPECT_TRUE(e.signaled) << "rank " << e.rank;
      EXPECT_EQ(e.signal, SIGTERM);
      EXPECT_TRUE(e.stopped_by_launcher);
    }
}

TEST(LaunchTest, ARankKilledBySignalGives128PlusTheSignal) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"sh", "-c", "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 60"};
  Captured c;
  const LaunchResult r = launch(o, c.sinks());
  EXPECT_EQ(r.exit_status, 137);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_NE(r.summary.find("killed by signal 9"), std::string::npos) << r.summary;
}

TEST(LaunchTest, RanksThatIgnoreSigtermAreKilledAfterTheGrace) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.kill_grace_s = 0.5;
  o.command = {"sh", "-c", "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 1; fi; trap '' TERM; while :; do sleep 0.1; done"};
  Captured c;
  const LaunchResult r = launch(o, c.sinks());
  EXPECT_EQ(r.exit_status, 1);
  bool killed = false;
  for (const std::string& n : c.notes) killed = killed || n.find("sending SIGKILL") != std::string::npos;
  EXPECT_TRUE(killed);
}

TEST(LaunchTest, SignalsToTheLauncherAreForwardedToEveryRank) {
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"sh", "-c", "trap 'echo got TERM >&2; exit 7' TERM; echo ready >&2; sleep 60 & wait"};
  Captured c;
  int ready = 0;
  LaunchSinks s = c.sinks();
  auto inner = s.rank_line;
  s.rank_line = [&](int r, const std::string& l) {
    inner(r, l);
    if (l == "ready" && ++ready == 2) kill(getpid(), SIGTERM);  // handled by launch while it runs
  };
  const LaunchResult r = launch(o, s);
  EXPECT_EQ(r.exit_status, 7);
  EXPECT_TRUE(c.has(0, "got TERM"));
  EXPECT_TRUE(c.has(1, "got TERM"));
}

TEST(LaunchTest, AMissingCommandIs127) {
  LaunchOptions o;
  o.command = {"saturate-no-such-command"};
  Captured c;
  const LaunchResult r = launch(o, c.sinks());
  EXPECT_EQ(r.exit_status, 127);
  EXPECT_TRUE(c.has(0, "cannot run 'saturate-no-such-command'"));
}

TEST(LaunchTest, BadOptionsAreUsageErrors) {
  LaunchOptions o;
  o.command = {"true"};
  o.nproc_per_node = 0;
  ASSERT_USAGE_ERROR_ABOUT(check_launch_options(o), "nproc_per_node", "0 is not a positive count of processes");
  o.nproc_per_node = 1;
  o.nnodes = 2;
  o.node_rank = 2;
  ASSERT_THROWS_WITH(check_launch_options(o), UsageError, "`node_rank`: 2 is outside 0..1");
  o.node_rank = 1;
  ASSERT_THROWS_WITH(check_launch_options(o), UsageError, "`master_port`: needed with `nnodes` 2");
  o.master_port = 29500;
  ASSERT_THROWS_WITH(check_launch_options(o), UsageError, "`master_addr`: 127.0.0.1 is this machine's loopback");
  o = LaunchOptions{};
  ASSERT_THROWS_WITH(check_launch_options(o), UsageError, "no command to run");
}

TEST(LaunchTest, PrefixNamesRankWorldAndHost) {
  EXPECT_EQ(rank_prefix(1, 4, "node7"), "[rank 1/4 node7] ");
  EXPECT_GT(free_port(), 0);
}

}  // namespace
}  // namespace saturate

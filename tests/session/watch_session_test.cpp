// `saturate monitor` as a library call (session/watch_session.h): the child's exit status comes
// back, every sample lands in the CSV log, a SIGTERM to the watcher goes on to the child (which
// ends by it) while the watcher lives to give the summary, and bad options are refused by name.
#include "saturate/session/watch_session.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

WatchSessionOptions watching(std::vector<std::string> command) {
  WatchSessionOptions o;
  o.watch.command = std::move(command);
  o.watch.sample_hz = 50;
  o.watch.interval_s = 0;
  o.watch.nvml_path = "/nonexistent/libnvidia-ml.so";  // /proc sampling, on any machine
  return o;
}

}  // namespace

TEST(WatchSessionTest, TheChildsExitStatusComesBackAndEverySampleIsLogged) {
  const std::string dir = saturate::testing::temp_dir("watch_session");
  WatchSessionOptions o = watching({"sh", "-c", "sleep 0.3; exit 3"});
  o.log = dir + "/samples.csv";
  const WatchSessionResult r = run_watch_session(o);
  EXPECT_EQ(r.watch.exit_status, 3);
  EXPECT_EQ(r.what, "sh");
  EXPECT_NE(r.text().find("saturate: sh exited with status 3"), std::string::npos) << r.text();
  std::ifstream log(o.log);
  std::string header, row;
  ASSERT_TRUE(std::getline(log, header));
  int rows = 0;
  while (std::getline(log, row)) ++rows;
  EXPECT_NE(header.find(','), std::string::npos) << header;
  EXPECT_GE(rows, 1);
  EXPECT_EQ(rows, r.watch.utilization.samples) << "every sample the summary counts is a row";
}

TEST(WatchSessionTest, ASigtermToTheWatcherEndsTheChildAndTheWatcherGivesItsSummary) {
  WatchSessionOptions o = watching({"sleep", "30"});
  std::atomic<bool> sent{false};
  o.watch.on_sample = [&sent](const Sample&, const std::string&) {  // the child runs: stop the watcher
    if (!sent.exchange(true)) kill(getpid(), SIGTERM);
  };
  const WatchSessionResult r = run_watch_session(o);
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(r.watch.exit_status, 128 + SIGTERM) << r.watch.how_it_ended;
  EXPECT_LT(r.watch.seconds, 20) << "the child was not stopped";
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL) << "the watcher's handler outlived the session";
}

TEST(WatchSessionTest, BadOptionsAreRefusedByNameBeforeAnythingRuns) {
  WatchSessionOptions o = watching({"true"});
  o.watch.interval_s = -1;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "interval", "-1 is outside 0..86400");
  o = watching({"true"});
  o.watch.sample_hz = 0;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "sample_hz", "0 is outside 0.001..10000");
  o = watching({"true"});
  o.log = "/nonexistent-dir/samples.csv";
  EXPECT_THROW(run_watch_session(o), UsageError);
}

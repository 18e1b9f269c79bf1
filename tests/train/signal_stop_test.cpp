// SIGINT, SIGTERM and SIGHUP during `saturate train`, sent at random moments of real runs: each
// run finishes its step, writes a final checkpoint and the JSON summary (interrupted: the signal)
// and exits 128 + the signal; the run resumed after three such stops has the loss curve of an
// uninterrupted run. A second signal stops a run at once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "train/checkpoint_file.h"
#include "support/fashion.h"
#include "support/support.h"

namespace {

using saturate::testing::read_json;

using saturate::testing::last_progress_step;
using saturate::testing::wait_exit;

int spawn(const std::vector<std::string>& args, const std::string& err_path) {
  return saturate::testing::spawn_saturate(args, err_path);
}

const char* const kSignalRunArgs[] = {"train", "--model", "mlp", "--width", "128", "--data", "fashion-mnist",
                                   "--device", "cpu", "--steps", "1500", "--batch", "64", "--workers", "1",
                                   "--seed", "7", "--optimizer", "adam", "--log-every", "10", "--no-monitor"};

std::vector<std::string> signal_run_args(const std::vector<std::string>& extra) {
  std::vector<std::string> args(std::begin(kSignalRunArgs), std::end(kSignalRunArgs));
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

/// Waits (up to 10 minutes: start-up is slow on a loaded machine) until the run has logged step
/// `step`, or has ended; true when it is still running.
bool wait_for_step(pid_t pid, const std::string& err_path, int64_t step) {
  for (int i = 0; i < 12000; ++i) {
    if (last_progress_step(err_path) >= step) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;  // ended (reaped: the caller must not wait)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}


TEST(SignalStopTest, SignalsAtRandomMomentsCheckpointAndTheResumedLossCurveEqualsAnUninterruptedRun) {
  saturate::testing::require_fashion_mnist();
  const std::string dir = saturate::testing::temp_dir("signal_stop");
  ASSERT_EQ(wait_exit(spawn(signal_run_args({"--json", dir + "/whole.json", "-q"}), dir + "/whole.err")), 0);
  const std::vector<double> whole = read_json(dir + "/whole.json").at("losses").get<std::vector<double>>();
  ASSERT_EQ(whole.size(), 1500u);

  const std::string ckpt = dir + "/ckpt";
  std::mt19937 rng(std::random_device{}());
  int64_t stopped_at = 0;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const std::string json = dir + "/run" + std::to_string(sig) + ".json";
    const std::string err = dir + "/run" + std::to_string(sig) + ".err";
    std::vector<std::string> extra = {"--json", json};
    if (stopped_at > 0) extra.insert(extra.end(), {"--resume", ckpt});
    else extra.insert(extra.end(), {"--checkpoint-dir", ckpt});
    const pid_t pid = spawn(signal_run_args(extra), err);
    // a random moment: after 10-200 more steps, then 0-50 ms into the steps that follow
    const int64_t at = stopped_at + std::uniform_int_distribution<int64_t>(1, 20)(rng) * 10;
    ASSERT_TRUE(wait_for_step(pid, err, at)) << "the run ended before step " << at << " (see " << err << ")";
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 50)(rng)));
    kill(pid, sig);
    ASSERT_EQ(wait_exit(pid), 128 + sig) << "see " << err;
    const nlohmann::json j = read_json(json);
    ASSERT_TRUE(j.at("interrupted").is_object()) << j.dump();
    EXPECT_EQ(j["interrupted"]["signal"], sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    const int64_t after = j["interrupted"]["after_step"].get<int64_t>();
    EXPECT_GE(after, at);
    EXPECT_LT(after, 1500);
    EXPECT_EQ(j["steps"].get<int64_t>(), after);
    // the summary's losses are every step's so far, and so far they are the uninterrupted run's
    const auto losses = j["losses"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(losses.size()), after);
    for (int64_t i = 0; i < after; ++i) ASSERT_EQ(losses[i], whole[i]) << "step " << i;
    stopped_at = after;
  }
  ASSERT_EQ(wait_exit(spawn(signal_run_args({"--resume", ckpt, "--json", dir + "/resumed.json", "-q"}), dir + "/resumed.err")),
            0);
  const nlohmann::json resumed = read_json(dir + "/resumed.json");
  EXPECT_TRUE(resumed["interrupted"].is_null());
  EXPECT_EQ(resumed["resumed_from"].get<int64_t>(), stopped_at);
  const auto losses = resumed["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(losses[i], whole[i]) << "step " << i;
}

TEST(SignalStopTest, ASecondSignalStopsTheRunAtOnce) {
  saturate::testing::require_fashion_mnist();
  const std::string dir = saturate::testing::temp_dir("signal_twice");
  // steps of about a second (a wide mlp at a large batch): the first signal waits for the step
  // in progress to end, the second must not
  const std::string err = dir + "/run.err";
  const pid_t pid = spawn({"train", "--model", "mlp", "--width", "2048", "--data", "fashion-mnist", "--device", "cpu",
                           "--steps", "1000", "--batch", "4096", "--workers", "1", "--log-every", "1", "--loss-every", "1", "--no-monitor",
                           "--checkpoint-dir", dir + "/ckpt", "--json", dir + "/run.json"},
                          err);
  ASSERT_TRUE(wait_for_step(pid, err, 1));
  kill(pid, SIGTERM);
  bool told = false;  // the handler ran (a signal sent while the first is pending would merge)
  for (int i = 0; i < 2000 && !told; ++i) {
    std::ifstream in(err);
    std::stringstream text;
    text << in.rdbuf();
    told = text.str().find("SIGTERM received") != std::string::npos;
    if (!told) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(told);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  // ended by the second signal itself, mid-step: no summary, no checkpoint
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(std::ifstream(dir + "/run.json").good());
  EXPECT_FALSE(std::ifstream(saturate::checkpoint_path(dir + "/ckpt")).good());
}

}  // namespace

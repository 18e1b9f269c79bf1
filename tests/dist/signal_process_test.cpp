// SIGTERM to `saturate launch` while two ranks train (what SLURM and Kubernetes send before a
// preemption): the launcher forwards it, every rank finishes the same step, rank 0 writes a
// checkpoint and the summary, and the launch exits 143; resumed under launch, the loss curve is
// the uninterrupted two-rank run's. Run by ctest's `dist` label (SATURATE_DIST_TESTS=1).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace saturate {
namespace {

using saturate::testing::read_json;

using testing::last_progress_step;
using testing::wait_exit;

int spawn(const std::vector<std::string>& args, const std::string& err_path) {
  return testing::spawn_saturate(args, err_path);
}

std::vector<std::string> launch_train(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"launch", "--nproc-per-node", "2", "--", SATURATE_BINARY, "train", "--model", "mlp",
                                   "--layers", "1", "--width", "64", "--data", "fashion-mnist", "--device", "cpu",
                                   "--threads", "1", "--workers", "0", "--no-augment", "--optimizer", "sgd", "--lr",
                                   "0.05", "--steps", "3000", "--global-batch", "64", "--batch", "32", "--log-every",
                                   "10", "--no-monitor"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(DistProcessTest, SigtermToTheLauncherCheckpointsEveryRankAtTheSameStepAndTheResumeContinuesTheCurve) {
  if (!std::getenv("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist";
  const std::string dir = testing::temp_dir("dist_signal");
  ASSERT_EQ(wait_exit(spawn(launch_train({"--json", dir + "/whole.json", "-q"}), dir + "/whole.err")), 0)
      << "see " << dir << "/whole.err";
  const auto whole = read_json(dir + "/whole.json").at("losses").get<std::vector<double>>();
  ASSERT_EQ(whole.size(), 3000u);

  const std::string err = dir + "/run.err";
  const pid_t pid = spawn(launch_train({"--checkpoint-dir", dir + "/ckpt", "--json", dir + "/run.json"}), err);
  std::mt19937 rng(std::random_device{}());
  const int64_t at = std::uniform_int_distribution<int64_t>(1, 30)(rng) * 10;
  bool reached = false;
  for (int i = 0; i < 12000 && !reached; ++i) {
    reached = last_progress_step(err) >= at;
    if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(reached) << "no progress to step " << at << " (see " << err << ")";
  kill(pid, SIGTERM);
  ASSERT_EQ(wait_exit(pid), 128 + SIGTERM) << "see " << err;
  const nlohmann::json j = read_json(dir + "/run.json");
  ASSERT_TRUE(j.at("interrupted").is_object()) << j.dump();
  const int64_t after = j["interrupted"]["after_step"].get<int64_t>();
  EXPECT_GE(after, at);
  EXPECT_LT(after, 3000);

  ASSERT_EQ(wait_exit(spawn(launch_train({"--resume", dir + "/ckpt", "--json", dir + "/resumed.json", "-q"}),
                            dir + "/resumed.err")),
            0)
      << "see " << dir << "/resumed.err";
  const nlohmann::json resumed = read_json(dir + "/resumed.json");
  EXPECT_EQ(resumed["resumed_from"].get<int64_t>(), after);
  const auto losses = resumed["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(losses[i], whole[i]) << "step " << i;
}

}  // namespace
}  // namespace saturate

// Kill `saturate train` (SIGKILL) again and again while it writes a checkpoint every step: the
// checkpoint on disk is always a complete earlier one, and the resumed loss curve is identical
// to the uninterrupted one.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "train/checkpoint_file.h"
#include "support/fashion.h"
#include "support/support.h"

namespace {

const char* const kTrainArgs[] = {"train", "--model", "mlp", "--width", "128", "--data", "fashion-mnist",
                                   "--device", "cpu", "--steps", "120", "--batch", "64", "--workers", "1",
                                   "--seed", "5", "--optimizer", "adam", "-q"};

std::vector<std::string> train_args(const std::vector<std::string>& extra) {
  std::vector<std::string> args(std::begin(kTrainArgs), std::end(kTrainArgs));
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

using saturate::testing::wait_exit;

int spawn(const std::vector<std::string>& args) { return saturate::testing::spawn_saturate(args); }

std::vector<double> losses_of(const std::string& json_path) {
  std::ifstream in(json_path);
  return nlohmann::json::parse(in).at("losses").get<std::vector<double>>();
}


}  // namespace

TEST(ResumeKillTest, KilledRunsResumeFromACompleteCheckpointWithAnIdenticalLossCurve) {
  saturate::testing::require_fashion_mnist();
  const std::string dir = saturate::testing::temp_dir("kill");
  ASSERT_EQ(wait_exit(spawn(train_args({"--json", dir + "/whole.json"}))), 0);
  const std::vector<double> whole = losses_of(dir + "/whole.json");
  ASSERT_EQ(whole.size(), 120u);

  const std::string ckpt = dir + "/ckpt";
  std::mt19937 rng(42);
  int kills = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::string> extra = {"--checkpoint-every", "1"};
    if (std::ifstream(saturate::checkpoint_path(ckpt)).good()) extra.insert(extra.end(), {"--resume", ckpt});
    else extra.insert(extra.end(), {"--checkpoint-dir", ckpt});
    const pid_t pid = spawn(train_args(extra));
    // wait until this run has written a checkpoint of its own (start-up takes seconds on a
    // loaded machine), then kill it a random moment later: sometimes mid-write.
    const auto path = saturate::checkpoint_path(ckpt);
    const auto written = [&] {
      struct stat st {};
      return ::stat(path.c_str(), &st) == 0 ? st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : 0LL;
    };
    const long long before = written();
    for (int i = 0; i < 1200 && written() == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    kill(pid, SIGKILL);
    const int status = wait_exit(pid);
    if (status == 128 + SIGKILL) ++kills;
    // whatever the moment of the kill, what is on disk is a whole checkpoint (or none yet)
    if (std::ifstream(saturate::checkpoint_path(ckpt)).good()) {
      EXPECT_NO_THROW(saturate::read_checkpoint_file(ckpt));
    }
  }
  EXPECT_GE(kills, 3) << "the runs finished before they could be killed; the test proves little";
  ASSERT_EQ(wait_exit(spawn(train_args({"--resume", ckpt, "--checkpoint-every", "1", "--json", dir + "/resumed.json"}))), 0);
  const std::vector<double> resumed = losses_of(dir + "/resumed.json");
  ASSERT_EQ(resumed.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(resumed[i], whole[i]) << "step " << i;
}

TEST(ResumeKillTest, AHalfWrittenTemporaryFileDoesNotHideTheLastCheckpoint) {
  const std::string dir = saturate::testing::temp_dir("halfwritten");
  saturate::write_checkpoint_file(dir, "complete state");
  std::ofstream(saturate::checkpoint_path(dir) + ".tmp", std::ios::binary) << "SATCKPT1 trunc";  // a crash mid-write
  EXPECT_EQ(saturate::read_checkpoint_file(dir), "complete state");
  saturate::write_checkpoint_file(dir, "newer state");  // the next write replaces the leftover
  EXPECT_EQ(saturate::read_checkpoint_file(dir), "newer state");
}

// `saturate train` as real ranks started by `saturate launch` (Gloo on loopback): the loss curve of
// two ranks equals one process with the same global batch, only rank 0 writes, an OOM on one rank
// makes every rank back off together, and a rank killed mid-training stops the launch naming it
// while the last checkpoint stays usable for a resume (on another number of ranks too).
// Run by ctest's `dist` label (SATURATE_DIST_TESTS=1).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include "saturate/dist/launch.h"
#include "saturate/models/zoo.h"
#include "support/support.h"

namespace saturate {
namespace {

using saturate::testing::read_json;

namespace fs = std::filesystem;

#define SKIP_OUTSIDE_DIST_LABEL()                                                      \
  do {                                                                                 \
    if (!std::getenv("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist"; \
  } while (0)

const std::string kBin = SATURATE_BINARY;
// a small model on Fashion-MNIST, data in a fixed order (no augmentation), one thread per rank
const std::string kTrain = " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --threads 1 "
                           "--workers 0 --no-augment --optimizer sgd --lr 0.05 ";

int free_port_for_test() { return free_port("127.0.0.1"); }

/// `saturate launch --nproc-per-node n -- sh -c '<rank_command>'`; $RANK is expanded per rank.
std::string launch(int n, const std::string& rank_command) {
  return "timeout 300 " + kBin + " launch --nproc-per-node " + std::to_string(n) + " -- sh -c '" + rank_command + "'";
}

TEST(DistProcessTest, TrainOnTwoRanksFollowsTheOneProcessLossCurveAndOnlyRankZeroWrites) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train");
  // 2 ranks x micro-batch 16 x accumulation 2 = global batch 64; every rank gets its own output
  // paths, so that anything a rank other than 0 wrote would show
  const std::string flags = "--steps 40 --global-batch 64 --batch 16 --bucket-mb 0.01 ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + kTrain + flags + "--json " + dir + "/dist_$RANK.json --save " +
                                               dir + "/model_$RANK.pt --checkpoint-dir " + dir + "/ckpt_$RANK"),
                                 &out),
            0)
      << out;
  // one process, the same global batch in micro-batches of 32
  std::string single_out;
  ASSERT_EQ(testing::run_command("timeout 300 " + kBin + kTrain + "--steps 40 --global-batch 64 --batch 32 --json " +
                                     dir + "/single.json -q",
                                 &single_out),
            0)
      << single_out;

  EXPECT_TRUE(fs::exists(dir + "/dist_0.json"));
  EXPECT_TRUE(fs::exists(dir + "/model_0.pt"));
  EXPECT_FALSE(fs::exists(dir + "/dist_1.json")) << "rank 1 wrote a summary";
  EXPECT_FALSE(fs::exists(dir + "/model_1.pt")) << "rank 1 wrote a model";
  EXPECT_FALSE(fs::exists(dir + "/ckpt_1/checkpoint.pt")) << "rank 1 wrote a checkpoint";
  EXPECT_TRUE(fs::exists(dir + "/ckpt_0/checkpoint.pt"));

  const auto dist = read_json(dir + "/dist_0.json");
  const auto single = read_json(dir + "/single.json");
  EXPECT_EQ(dist["world_size"].get<int>(), 2);
  EXPECT_EQ(dist["backend"].get<std::string>(), "gloo");
  EXPECT_EQ(single["world_size"].get<int>(), 1);
  EXPECT_EQ(dist["global_batch"].get<int64_t>(), 64);
  EXPECT_EQ(dist["micro_batch"].get<int64_t>(), 16);
  EXPECT_EQ(dist["samples_seen"].get<int64_t>(), single["samples_seen"].get<int64_t>());
  EXPECT_GT(dist["allreduce_ms"].get<double>(), 0);
  EXPECT_GT(dist["gradient_buckets"].get<int64_t>(), 1);  // 10 KiB buckets: several per backward
  const double overlap = dist["allreduce_overlap_fraction"].get<double>();
  EXPECT_GE(overlap, 0);
  EXPECT_LE(overlap, 1);

  const auto a = dist["losses"].get<std::vector<double>>();
  const auto b = single["losses"].get<std::vector<double>>();
  ASSERT_EQ(a.size(), 40u);
  ASSERT_EQ(b.size(), 40u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-4 * std::abs(b[i])) << "step " << i;
  EXPECT_LT(a.back(), a.front());  // it learned something
}

/// An `adaptive` run's samples follow from its change log (each segment's steps x its global
/// batch, every batch whole base batches), and it grew; returns its last global batch.
int64_t expect_samples_follow_the_change_log(const nlohmann::json& j, int64_t base_batch, int64_t steps) {
  int64_t samples = 0, step = 0, batch = base_batch;
  for (const auto& c : j["adaptive"]["changes"]) {
    EXPECT_EQ(c["old_global_batch"].get<int64_t>(), batch);
    EXPECT_EQ(c["new_global_batch"].get<int64_t>() % base_batch, 0);
    samples += (c["step"].get<int64_t>() - step) * batch;
    step = c["step"].get<int64_t>();
    batch = c["new_global_batch"].get<int64_t>();
  }
  samples += (steps - step) * batch;
  EXPECT_GT(batch, base_batch);
  EXPECT_EQ(j["global_batch"].get<int64_t>(), batch);
  EXPECT_EQ(j["samples_seen"].get<int64_t>(), samples);
  return batch;
}

TEST(DistProcessTest, AdaptiveTrainingOnTwoRanksGrowsTheGlobalBatchTogether) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_adaptive");
  // every rank decides on the ranks' mean noise averages and a mean-of-ranks curve, and checks
  // that the others chose the same batch (a rank that did not would fail the run). A base batch of
  // 8 (4 per rank): one thread's samples/s nearly double from 4 to 8 to 16, far more than the
  // efficiency loses at the noise scale's ~60, so the growth holds however loaded the machine is.
  const std::string flags = "--steps 120 --batch 256 --adaptive --base-batch 8 --adapt-every 10 --bucket-mb 1 ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + kTrain + flags + "--json " + dir + "/dist_$RANK.json"), &out),
            0)
      << out;
  const auto j = read_json(dir + "/dist_0.json");
  EXPECT_EQ(j["world_size"].get<int>(), 2);
  const auto& changes = j["adaptive"]["changes"];
  ASSERT_FALSE(changes.empty()) << j["adaptive"].dump();
  expect_samples_follow_the_change_log(j, 8, 120);
}

TEST(DistProcessTest, AdaptiveTrainingWithUnequalSharesGrowsEveryRanksShareTogether) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_adaptive_shares");
  // the shares split the base batch (6 + 2 = 8): a global batch of u base batches gives rank 0
  // 6u and rank 1 2u samples. Every rank decides on every rank's own curve (the step takes the
  // slowest rank's time on its share) and checks that the others chose the same batch; rank 1
  // runs on half the threads of rank 0
  const std::string train = " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --workers 0 "
                            "--no-augment --optimizer sgd --lr 0.05 --threads $((2 - RANK)) ";
  const std::string flags = "--steps 120 --batch 256 --adaptive --base-batch 8 --shares 6,2 --adapt-every 10 "
                            "--bucket-mb 1 ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + train + flags + "--json " + dir + "/dist.json"), &out), 0)
      << out;
  const auto j = read_json(dir + "/dist.json");
  const auto& changes = j["adaptive"]["changes"];
  ASSERT_FALSE(changes.empty()) << j["adaptive"].dump();
  const int64_t batch = expect_samples_follow_the_change_log(j, 8, 120);
  ASSERT_EQ(j["ranks"].size(), 2u) << j.dump();
  EXPECT_EQ(j["ranks"][0]["share"].get<int64_t>(), batch / 8 * 6) << j["ranks"].dump();
  EXPECT_EQ(j["ranks"][1]["share"].get<int64_t>(), batch / 8 * 2) << j["ranks"].dump();
  const auto losses = j["losses"].get<std::vector<double>>();
  EXPECT_LT(losses.back(), losses.front());
}

TEST(DistProcessTest, AnOomOnOneRankMakesEveryRankBackOffTogether) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_oom");
  // rank 1 gets 96 MiB, where micro-batch 128 of the convnet does not fit (a search there finds
  // 85); rank 0 has room
  const std::string model = " train --model convnet --data fashion-mnist --device cpu --threads 1 --workers 0 "
                            "--no-augment --optimizer sgd --lr 0.01 --steps 3 --batch 128 ";
  std::string out;
  const int status = testing::run_command(
      launch(2, "exec " + kBin + model + "--memory-budget $([ \"$RANK\" = 0 ] && echo 4GiB || echo " +
                    "96MiB" + ") --json " + dir + "/oom.json"),
      &out);
  ASSERT_EQ(status, 0) << out;
  const auto j = read_json(dir + "/oom.json");  // rank 0's: it had room, but backed off with rank 1
  ASSERT_GE(j["oom_backoffs"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["oom_backoffs"][0]["step"].get<int64_t>(), 0);
  EXPECT_EQ(j["oom_backoffs"][0]["old_micro_batch"].get<int64_t>(), 128);
  EXPECT_EQ(j["micro_batch"].get<int64_t>(), j["oom_backoffs"].back()["new_micro_batch"].get<int64_t>());
  EXPECT_EQ(j["global_batch"].get<int64_t>(), 256);  // 2 ranks x 128, unchanged by the back-off
  EXPECT_EQ(j["steps"].get<int64_t>(), 3);
}

TEST(DistProcessTest, AnOomWhileOneRankJoinsItsShareMakesEveryRankBackOffTogether) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_join_oom");
  // rank 0 holds its share of 11520 images whole (34.5 MiB of 40) and joins micro-batch 3000's
  // pieces beside it: out of memory before its first step, outside the step's agreement points.
  // It announces it at rank 1's first one; both halve their micro-batches and train (before:
  // rank 0 exited 1 and rank 1 lost its peer)
  const std::string train = " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --threads 1 "
                            "--workers 0 --no-augment --eval-batch 64 --memory-budget 40MiB --shares 11520,2000 "
                            "--batch 3000,1000 --steps 3 -q ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + train + "--json " + dir + "/join.json"), &out), 0) << out;
  const auto j = read_json(dir + "/join.json");
  ASSERT_EQ(j["oom_backoffs"].size(), 1u) << j.dump();
  EXPECT_EQ(j["oom_backoffs"][0]["step"].get<int64_t>(), 0);
  EXPECT_EQ(j["oom_backoffs"][0]["old_micro_batch"].get<int64_t>(), 3000);
  EXPECT_EQ(j["steps"].get<int64_t>(), 3);
  EXPECT_EQ(j["ranks"][0]["micro_batch"].get<int64_t>(), 1500);
  EXPECT_EQ(j["ranks"][1]["micro_batch"].get<int64_t>(), 500);  // backed off with it
  EXPECT_EQ(j["global_batch"].get<int64_t>(), 13520);
}

TEST(DistProcessTest, KillingATrainingRankStopsTheLaunchNamingItAndTheCheckpointResumes) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_kill");
  const std::string ckpt = dir + "/ckpt";
  const std::string flags = "--steps 1000 --global-batch 64 --batch 32 --checkpoint-every 10 --dist-timeout 20 ";
  // each rank records its pid (exec keeps it); the launch runs in the background
  const std::string cmd = launch(2, "echo $$ > " + dir + "/pid_$RANK; exec " + kBin + kTrain + flags +
                                        "--checkpoint-dir " + ckpt + " -q");
  ASSERT_EQ(std::system(("(" + cmd + " > " + dir + "/log 2>&1; echo $? > " + dir + "/status) &").c_str()), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!(fs::exists(ckpt + "/checkpoint.pt") && fs::exists(dir + "/pid_1")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_FALSE(fs::exists(dir + "/status")) << "the run ended before the kill; make it longer";
  int pid = 0;
  std::ifstream(dir + "/pid_1") >> pid;
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  while (!fs::exists(dir + "/status") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status = -1;
  std::ifstream(dir + "/status") >> status;
  std::string log;
  testing::run_command("cat " + dir + "/log", &log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("rank 1 (pid " + std::to_string(pid) + ") was killed by signal 9"), std::string::npos) << log;

  // another global batch cannot resume it (another world size can: ResumingOnAnotherNumberOf...)
  std::string wrong;
  EXPECT_EQ(testing::run_command("timeout 120 " + kBin + kTrain + "--steps 1000 --global-batch 32 --batch 32 --resume " +
                                     ckpt + " -q",
                                 &wrong),
            2);
  EXPECT_NE(wrong.find("written with global batch 64 and this run has global batch 32"), std::string::npos) << wrong;

  // the same world size resumes it to the end
  std::string resumed;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + kTrain + flags + "--resume " + ckpt + " --json " + dir +
                                               "/resumed.json -q"),
                                 &resumed),
            0)
      << resumed;
  const auto j = read_json(dir + "/resumed.json");
  EXPECT_GT(j["resumed_from"].get<int64_t>(), 0);
  EXPECT_EQ(j["steps"].get<int64_t>(), 1000);
  EXPECT_EQ(j["losses"].size(), 1000u);
}

TEST(DistProcessTest, KillingARankOfATrainingMakesTheOtherFailNamingItWithinTheTimeout) {
  SKIP_OUTSIDE_DIST_LABEL();
  // ranks started directly (as mpirun or srun would, no launcher to stop them): rank 0 must find
  // out by itself, through the failed collective, and say which rank is gone
  const std::string dir = testing::temp_dir("dist_train_kill_direct");
  const std::string ckpt = dir + "/ckpt";
  const std::string port = std::to_string(free_port_for_test());
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    // exec keeps the pid that the test kills; rank 0's checkpoints say that training runs
    const std::string cmd = "RANK=" + r + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " exec " + kBin +
                            kTrain + "--steps 20000 --global-batch 64 --batch 32 --dist-timeout 20 " +
                            "--checkpoint-every 20 --checkpoint-dir " + ckpt + " -q > " + dir + "/log_" + r + " 2>&1";
    ASSERT_EQ(std::system(("(sh -c 'echo $$ > " + dir + "/pid_" + r + "; " + cmd + "'; echo $? > " + dir +
                           "/status_" + r + ") &")
                              .c_str()),
              0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  // kill rank 1 only once the ranks train together: rank 0 has written a checkpoint (step 20),
  // so the rendezvous is done however long a busy machine took to start the ranks
  while (!(fs::exists(dir + "/pid_1") && fs::exists(ckpt + "/checkpoint.pt")) &&
         !fs::exists(dir + "/status_0") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(ckpt + "/checkpoint.pt")) << "no checkpoint from rank 0: " << [&] {
    std::string log;
    testing::run_command("cat " + dir + "/log_0 " + dir + "/log_1", &log);
    return log;
  }();
  int pid = 0;
  std::ifstream(dir + "/pid_1") >> pid;
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(fs::exists(dir + "/status_0")) << "rank 0 ended before the kill";
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  while (!fs::exists(dir + "/status_0") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status = -1;
  std::ifstream(dir + "/status_0") >> status;
  std::string log;
  testing::run_command("cat " + dir + "/log_0", &log);
  EXPECT_EQ(status, 1) << log;  // a RuntimeFailure, not the timeout's 124
  EXPECT_NE(log.find("rank 1 (pid " + std::to_string(pid) + " on "), std::string::npos) << log;
  EXPECT_NE(log.find("has exited"), std::string::npos) << log;
}

/// The weights `--save` wrote, by name (an mlp --layers 1 --width 64 on Fashion-MNIST's images).
std::vector<std::pair<std::string, torch::Tensor>> saved_mlp(const std::string& path) {
  ModelSpec spec;
  spec.name = "mlp";
  spec.layers = 1;
  spec.width = 64;
  spec.input_shape = {1, 28, 28};
  spec.classes = 10;
  BuiltModel m = build_model(resolve_model_spec(spec));
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  m.model->module()->load(archive);
  return m.model->named_tensors();
}

/// `run` trained the one-process run `single` exactly: `steps` losses each within 1e-6 (relative)
/// and every weight of the `--save`d models within 1e-6.
void expect_one_process_run(const nlohmann::json& run, const std::string& run_model, const nlohmann::json& single,
                            const std::string& single_model, size_t steps) {
  const auto a = run["losses"].get<std::vector<double>>();
  const auto b = single["losses"].get<std::vector<double>>();
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::abs(b[i])) << "step " << i;
  const auto wd = saved_mlp(run_model), ws = saved_mlp(single_model);
  ASSERT_EQ(wd.size(), ws.size());
  for (size_t i = 0; i < wd.size(); ++i)
    EXPECT_LT((wd[i].second - ws[i].second).abs().max().item<double>(), 1e-6) << wd[i].first;
}

TEST(DistProcessTest, UnequalSharesOnTwoRanksTrainTheOneProcessWeightsOfTheSameGlobalBatches) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_shares");
  // rank 0 trains on 48 and rank 1 on 16 of every 64 samples: micro 16 x 3 and 16 x 1; the
  // weighted average of their gradients is the one-process gradient of the 64
  // with the gradient noise scale measured: rank 0's first micro-batch is samples 0-15 of every
  // global batch, as one process's with micro-batch 16, so their estimates must agree
  const std::string flags = "--steps 20 --global-batch 64 --batch 16 --shares 48,16 --noise-scale ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + kTrain + flags + "--json " + dir + "/dist.json --save " +
                                               dir + "/dist.pt"),
                                 &out),
            0)
      << out;
  std::string single_out;
  ASSERT_EQ(testing::run_command("timeout 300 " + kBin + kTrain + "--steps 20 --global-batch 64 --batch 16 --noise-scale "
                                     "--json " + dir + "/single.json --save " + dir + "/single.pt -q",
                                 &single_out),
            0)
      << single_out;
  // (averaged unweighted, as DDP does for equal shares, rank 1's 16 samples would count as much
  // as rank 0's 48: the weights and losses part from step 1 on)
  const auto dist = read_json(dir + "/dist.json");
  const auto single = read_json(dir + "/single.json");
  EXPECT_EQ(dist["global_batch"].get<int64_t>(), 64);
  EXPECT_EQ(dist["samples_seen"].get<int64_t>(), single["samples_seen"].get<int64_t>());
  ASSERT_EQ(dist["ranks"].size(), 2u) << dist.dump();
  EXPECT_EQ(dist["ranks"][0]["share"].get<int64_t>(), 48);
  EXPECT_EQ(dist["ranks"][0]["accumulation"].get<int64_t>(), 3);
  EXPECT_EQ(dist["ranks"][1]["share"].get<int64_t>(), 16);
  EXPECT_EQ(dist["ranks"][1]["accumulation"].get<int64_t>(), 1);
  for (const auto& r : dist["ranks"]) {
    EXPECT_EQ(r["micro_batch"].get<int64_t>(), 16);
    EXPECT_GT(r["samples_per_s"].get<double>(), 0);
    EXPECT_GE(r["wait_ms"].get<double>(), 0);
  }
  EXPECT_NE(out.find("share 48 of 64 = micro 16 x 3"), std::string::npos) << out;
  const auto& nd = dist["gradient_noise_scale"];
  const auto& ns = single["gradient_noise_scale"];
  ASSERT_TRUE(nd["value"].is_number()) << dist.dump();
  EXPECT_EQ(nd["measurements"].get<int64_t>(), ns["measurements"].get<int64_t>());
  EXPECT_NEAR(nd["trace_covariance"].get<double>(), ns["trace_covariance"].get<double>(),
              1e-4 * std::abs(ns["trace_covariance"].get<double>()));
  EXPECT_NEAR(nd["value"].get<double>(), ns["value"].get<double>(), 1e-4 * std::abs(ns["value"].get<double>()));
  // the HTML report has the ranks' table too
  std::string html;
  ASSERT_EQ(testing::run_command(kBin + " report " + dir + "/dist.json -o " + dir + "/dist.html -q", &html), 0) << html;
  std::ifstream page(dir + "/dist.html");
  const std::string text((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("rank 1: share 16 = micro 16 x 1"), std::string::npos);
  // and the network measured between the ranks, as the JSON has it
  ASSERT_TRUE(dist.contains("network")) << dist.dump();
  const std::string busbw = fmt::format("all-reduce bus bandwidth {:.1f} MB/s",
                                        dist["network"]["busbw_bytes_per_s"].get<double>() / 1e6);
  EXPECT_NE(text.find("<th>network</th><td>" + busbw), std::string::npos) << busbw;
  EXPECT_NE(text.find(fmt::format("predicted {:.1f} ms", dist["network"]["predicted_allreduce_ms"].get<double>())),
            std::string::npos);
  expect_one_process_run(dist, dir + "/dist.pt", single, dir + "/single.pt", 20);
  const auto losses = dist["losses"].get<std::vector<double>>();
  EXPECT_LT(losses.back(), losses.front());  // it learned something
}

/// `rank_train` (a `saturate train` command line after the binary) on `ranks` ranks and
/// `one_train` in one process, each writing DIR/dist.json and dist.pt (rank 0), single.json and
/// single.pt; returns their JSON and the ranks' output. Fails the test when either run fails.
struct RanksAndAlone {
  nlohmann::json dist, single;
  std::string out;
};
RanksAndAlone train_on_ranks_and_alone(const std::string& dir, int ranks, const std::string& rank_train,
                                       const std::string& one_train) {
  RanksAndAlone r;
  EXPECT_EQ(testing::run_command(
                launch(ranks, "exec " + kBin + rank_train + "--json " + dir + "/dist.json --save " + dir + "/dist.pt"),
                &r.out),
            0)
      << r.out;
  std::string single_out;
  EXPECT_EQ(testing::run_command("timeout 300 " + kBin + one_train + "--json " + dir + "/single.json --save " + dir +
                                     "/single.pt -q",
                                 &single_out),
            0)
      << single_out;
  r.dist = read_json(dir + "/dist.json");
  r.single = read_json(dir + "/single.json");
  return r;
}

TEST(DistProcessTest, SharesAutoSplitTheGlobalBatchByEachRanksMeasuredSpeedAndTrainTheOneProcessWeights) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_shares_auto");
  // rank 0 with two threads, rank 1 with one (whatever each measures, the split must follow it)
  const std::string flags = "--steps 10 --global-batch 96 --batch 32 --shares auto --reshare-every 0 ";
  const std::string train = " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --workers 0 "
                            "--no-augment --optimizer sgd --lr 0.05 --threads $((2 - RANK)) ";
  const auto [dist, single, out] =
      train_on_ranks_and_alone(dir, 2, train + flags, kTrain + "--steps 10 --global-batch 96 --batch 32 ");
  ASSERT_EQ(dist["shares_by"].get<std::string>(), "speed") << dist.dump();
  ASSERT_EQ(dist["ranks"].size(), 2u);
  double speed_sum = 0;
  int64_t share_sum = 0;
  for (const auto& r : dist["ranks"]) {
    speed_sum += r["measured_samples_per_s"].get<double>();
    share_sum += r["share"].get<int64_t>();
    EXPECT_GE(r["share"].get<int64_t>(), 1);
  }
  EXPECT_EQ(share_sum, 96);
  for (const auto& r : dist["ranks"]) {  // in proportion to the speeds, to a sample
    const double exact = 96.0 * r["measured_samples_per_s"].get<double>() / speed_sum;
    EXPECT_LE(std::abs(static_cast<double>(r["share"].get<int64_t>()) - exact), 1.0) << dist["ranks"].dump();
  }
  EXPECT_NE(out.find("shares      by speed"), std::string::npos) << out;
  // whatever the split, the update is the one-process update of the same 96 samples
  expect_one_process_run(dist, dir + "/dist.pt", read_json(dir + "/single.json"), dir + "/single.pt", 10);
}

TEST(DistProcessTest, GivenSharesFarFromTheRanksSpeedsAreReSplitWhileTrainingAndStillTrainTheOneProcessWeights) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_shares_rebalance");
  // a start far from any balance (176 of 192 on rank 0; even at three times rank 1's speed its
  // fair part is 144), a look every 3 steps, and a re-split whenever the split by the busy times
  // differs (gain 1): the split moves whatever else takes the cores (before, from a split by speed
  // timed alone, two loaded cores could leave it where it was), and every global batch must still
  // be the one-process batch
  const std::string flags = "--steps 20 --global-batch 192 --batch 64 --shares 176,16 --reshare-every 3 "
                            "--reshare-min-gain 1 ";
  const std::string train = " train --model mlp --layers 1 --width 256 --data fashion-mnist --device cpu --workers 1 "
                            "--no-augment --optimizer sgd --lr 0.05 --threads $((2 - RANK)) ";
  const auto [dist, single, out] = train_on_ranks_and_alone(
      dir, 2, train + flags,
      " train --model mlp --layers 1 --width 256 --data fashion-mnist --device cpu --threads 1 --workers 0 "
      "--no-augment --optimizer sgd --lr 0.05 --steps 20 --global-batch 192 --batch 64 ");
  EXPECT_EQ(dist["shares_by"].get<std::string>(), "given") << dist.dump();
  ASSERT_TRUE(dist.contains("share_balance")) << dist.dump();
  const auto& balance = dist["share_balance"];
  EXPECT_EQ(balance["every_steps"].get<int64_t>(), 3);
  EXPECT_GE(balance["looks"].get<int64_t>(), 2);
  const auto& changes = balance["changes"];
  ASSERT_GE(changes.size(), 1u) << balance.dump();
  // the re-splits start from the given split (which way they go is the busy times': on two shared
  // cores a rank's busy time is as much the scheduler's as its share's, so only the rule is checked)
  EXPECT_EQ(changes[0]["from"].get<std::vector<int64_t>>(), (std::vector<int64_t>{176, 16})) << changes[0];
  std::vector<int64_t> before;
  for (const auto& r : dist["ranks"]) before.push_back(r["share"].get<int64_t>());
  int64_t last_step = 0;
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto to = changes[i]["to"].get<std::vector<int64_t>>();
    EXPECT_EQ(std::accumulate(to.begin(), to.end(), int64_t{0}), 192) << changes[i];
    const auto speeds = changes[i]["samples_per_s"].get<std::vector<double>>();  // share / busy, per rank
    ASSERT_EQ(speeds.size(), 2u);
    for (size_t r = 0; r < 2; ++r)  // the new split is by those speeds, to a sample
      EXPECT_LE(std::abs(static_cast<double>(to[r]) - 192.0 * speeds[r] / (speeds[0] + speeds[1])), 1.0) << changes[i];
    EXPECT_GT(changes[i]["step"].get<int64_t>(), last_step);  // in order, each after steps of its own
    last_step = changes[i]["step"].get<int64_t>();
    if (i > 0) {
      EXPECT_EQ(changes[i]["from"], changes[i - 1]["to"]);
    }
  }
  EXPECT_EQ(changes.back()["to"].get<std::vector<int64_t>>(), before) << "the ranks' table shows the last split";
  EXPECT_NE(out.find("shares re-split by the speeds measured while training, step"), std::string::npos) << out;
  // whatever the splits, every step is the one-process update of the same 192 samples
  expect_one_process_run(dist, dir + "/dist.pt", single, dir + "/single.pt", 20);
}

TEST(DistProcessTest, ResumingOnAnotherNumberOfRanksWithOtherSharesContinuesTheOneProcessCurve) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_reshare");
  const std::string ckpt = dir + "/ckpt";
  // unequal budgets and thread counts on every rank; the same 64 samples a step throughout
  const std::string train = " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --workers 0 "
                            "--no-augment --optimizer sgd --lr 0.05 --global-batch 64 --batch 16 --threads $((RANK % 2 + 1)) ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + train + "--steps 10 --shares 48,16 --memory-budget "
                                                   "64MiB,40MiB --checkpoint-dir " + ckpt + " -q"),
                                 &out),
            0)
      << out;
  // 3 ranks take it from step 10 with other shares (the checkpoint's split is rank 0's, not theirs)
  ASSERT_EQ(testing::run_command(launch(3, "exec " + kBin + train + "--steps 20 --shares 16,24,24 --memory-budget "
                                                   "48MiB,64MiB,40MiB --resume " + ckpt + " --json " + dir +
                                                   "/resumed.json --save " + dir + "/resumed.pt"),
                                 &out),
            0)
      << out;
  std::string single_out;
  ASSERT_EQ(testing::run_command("timeout 300 " + kBin + kTrain + "--steps 20 --global-batch 64 --batch 32 --json " +
                                     dir + "/single.json --save " + dir + "/single.pt -q",
                                 &single_out),
            0)
      << single_out;
  const auto resumed = read_json(dir + "/resumed.json");
  EXPECT_EQ(resumed["resumed_from"].get<int64_t>(), 10);
  // the checkpoint recorded how the run it continues was split, and the summary says so
  EXPECT_EQ(resumed["resumed_split"]["world_size"].get<int64_t>(), 2) << resumed.dump();
  EXPECT_EQ(resumed["resumed_split"]["shares"], nlohmann::json({48, 16})) << resumed.dump();
  EXPECT_NE(out.find("(resumed from step 10, written by 2 rank(s) with shares 48,16)"), std::string::npos) << out;
  EXPECT_EQ(resumed["world_size"].get<int>(), 3);
  ASSERT_EQ(resumed["ranks"].size(), 3u);
  EXPECT_EQ(resumed["ranks"][0]["share"].get<int64_t>(), 16);
  EXPECT_EQ(resumed["ranks"][2]["accumulation"].get<int64_t>(), 2);
  expect_one_process_run(resumed, dir + "/resumed.pt", read_json(dir + "/single.json"), dir + "/single.pt", 20);
}

/// Each rank's own largest micro-batch under `batch` auto with unequal shares, checked in fresh
/// ranks that train at it given (issue 28, done-when (b)): with the same shares and every rank's
/// max as its micro-batch (`batch` M0,M1,...) the run trains with no back-off; one more on any
/// one rank runs that rank out of memory. `budgets_mib`: each rank's budget; its share (held
/// whole beside the step: the loader's batch) is 288 samples a MiB (most of the budget), above what its step fits beside it.
void expect_each_ranks_max_exact_in_fresh_ranks(const std::vector<int>& budgets_mib, const std::string& dir) {
  const int world = static_cast<int>(budgets_mib.size());
  std::vector<std::string> budgets;
  std::vector<int64_t> shares;
  for (int b : budgets_mib) {
    budgets.push_back(std::to_string(b) + "MiB");
    shares.push_back(288 * b);
  }
  // unequal budgets and thread counts
  const std::string train = fmt::format(
      " train --model mlp --layers 1 --width 64 --data fashion-mnist --device cpu --workers 0 --no-augment "
      "--optimizer sgd --lr 0.05 --eval-batch 64 --threads $((RANK % 2 + 1)) --memory-budget {} --shares {} ",
      fmt::join(budgets, ","), fmt::join(shares, ","));
  std::string out;
  ASSERT_EQ(testing::run_command(launch(world, "exec " + kBin + train + "--steps 1 --batch auto --json " + dir +
                                                   "/auto.json"),
                                 &out),
            0)
      << out;
  const auto searched = read_json(dir + "/auto.json");
  ASSERT_EQ(searched["ranks"].size(), static_cast<size_t>(world)) << searched.dump();
  std::vector<int64_t> max;
  for (const auto& r : searched["ranks"]) {
    ASSERT_TRUE(r.contains("max_batch")) << r.dump();
    EXPECT_TRUE(r["max_batch_exact"].get<bool>()) << r.dump();  // not capped by its share
    EXPECT_EQ(r["micro_batch"].get<int64_t>(), r["max_batch"].get<int64_t>()) << r.dump();
    max.push_back(r["max_batch"].get<int64_t>());
  }
  EXPECT_NE(*std::min_element(max.begin(), max.end()), *std::max_element(max.begin(), max.end()));
  // fresh ranks, the same shares, each rank's micro-batch given
  const auto fresh = [&](const std::vector<int64_t>& micro, const std::string& name, std::string* o) {
    const int status = testing::run_command(launch(world, "exec " + kBin + train + "--steps 2 --batch " +
                                                              fmt::format("{}", fmt::join(micro, ",")) + " --json " +
                                                              dir + "/" + name + ".json"),
                                            o);
    return status == 0 ? read_json(dir + "/" + name + ".json") : nlohmann::json();
  };
  std::string o;
  const auto at_max = fresh(max, "at_max", &o);
  ASSERT_TRUE(at_max.is_object()) << o;
  EXPECT_TRUE(at_max["oom_backoffs"].empty()) << at_max.dump();
  for (size_t r = 0; r < at_max["ranks"].size(); ++r)
    EXPECT_EQ(at_max["ranks"][r]["micro_batch"].get<int64_t>(), max[r]) << at_max["ranks"].dump();
  // one more on rank r runs rank r out of memory, in its step or while its loader joins the
  // share's pieces: every rank backs off together (or, where it cannot, the run stops naming the
  // rank's budget)
  for (int r = 0; r < world; ++r) {
    std::vector<int64_t> one_more = max;
    ++one_more[static_cast<size_t>(r)];
    const auto over = fresh(one_more, fmt::format("over_{}", r), &o);
    const bool backed_off = over.is_object() && !over["oom_backoffs"].empty();  // at step 0 or 1 (optimizer state)
    const std::string line = fmt::format("[rank {}/{} ", r, world);
    bool ran_out = false;
    for (size_t at = o.find(line); at != std::string::npos && !ran_out; at = o.find(line, at + 1)) {
      const std::string rest = o.substr(at, o.find('\n', at) - at);
      ran_out = rest.find("CPU budget exceeded") != std::string::npos || rest.find("out of memory") != std::string::npos;
    }
    EXPECT_TRUE(backed_off || ran_out) << "rank " << r << " trained " << one_more[static_cast<size_t>(r)]
                                       << " without running out of memory: its max was not exact\n"
                                       << o;
  }
}

TEST(DistProcessTest, EachRanksOwnMaxUnderUnequalSharesIsExactInFreshRanksOnTwoAndThreeRanks) {
  SKIP_OUTSIDE_DIST_LABEL();
  expect_each_ranks_max_exact_in_fresh_ranks({40, 24}, testing::temp_dir("dist_shares_max2"));
  expect_each_ranks_max_exact_in_fresh_ranks({24, 40, 32}, testing::temp_dir("dist_shares_max3"));
}

TEST(DistProcessTest, TrainBatchAutoOnRanksWithUnequalBudgetsUsesTheSmallerRanksBatch) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_train_auto");
  const std::string flags = "--steps 2 --batch auto -q ";
  std::string out;
  ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + kTrain + flags +
                                               "--memory-budget $([ \"$RANK\" = 0 ] && echo 40MiB || echo 24MiB) "
                                               "--json " + dir + "/dist.json"),
                                 &out),
            0)
      << out;
  std::string single;
  ASSERT_EQ(testing::run_command("timeout 120 " + kBin + kTrain + flags + "--memory-budget 24MiB --json " + dir +
                                     "/single.json",
                                 &single),
            0)
      << single;
  const auto d = read_json(dir + "/dist.json");
  const auto s = read_json(dir + "/single.json");
  // rank 1's 24 MiB decides: the one-process answer there, less what DDP's gradient buckets take
  // beside it (a copy of every gradient and one in flight: 400 KiB, ~130 images); before they
  // were counted, the exact one-process answer ran rank 1 out of memory at step 1
  const int64_t micro = d["micro_batch"].get<int64_t>(), single_micro = s["micro_batch"].get<int64_t>();
  EXPECT_LT(micro, single_micro);
  EXPECT_GT(micro, single_micro * 95 / 100);
  EXPECT_EQ(d["global_batch"].get<int64_t>(), 2 * micro);
  EXPECT_TRUE(d["oom_backoffs"].empty()) << d.dump();
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(DistProcessTest, TunedBucketsAreTimedTogetherKeptOnlyWhenFasterAndLeaveTheTrainingAsItWouldBe) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_buckets");
  // a convnet (batch norm: its running statistics move in every training-mode forward), 443 KiB
  // of gradients; 6 steps of a global batch of 32
  const std::string train = kBin + " train --model convnet --width 8 --data fashion-mnist --device cpu --threads 1 "
                                   "--workers 0 --no-augment --optimizer sgd --lr 0.05 --steps 6 --global-batch 32 "
                                   "--batch 16 ";
  std::string out;
  ASSERT_EQ(testing::run_command(
                launch(2, "exec " + train + "--fast-paths try --json " + dir + "/tuned.json --save " + dir + "/tuned.pt"),
                &out),
            0)
      << out;
  const auto tuned = read_json(dir + "/tuned.json");
  ASSERT_TRUE(tuned.contains("gradient_bucket_tuning")) << tuned.dump();
  const auto& t = tuned["gradient_bucket_tuning"];
  const auto& candidates = t["candidates"];
  ASSERT_GE(candidates.size(), 3u) << t.dump();
  double best = 1e300, default_ms = 0;
  int defaults = 0;
  for (const auto& c : candidates) {
    EXPECT_GT(c["step_ms"].get<double>(), 0) << t.dump();
    EXPECT_GE(c["buckets"].get<int64_t>(), 1) << t.dump();
    best = std::min(best, c["step_ms"].get<double>());
    if (c["default"].get<bool>()) {
      ++defaults;
      default_ms = c["step_ms"].get<double>();
    }
  }
  EXPECT_EQ(defaults, 1) << t.dump();
  // the default stays unless another was timed min_speedup (1.1) times faster; then the fastest is taken
  const double margin = t["min_speedup"].get<double>();
  EXPECT_DOUBLE_EQ(margin, 1.1);
  const auto& chosen = t["chosen"];
  const double chosen_ms = [&] {
    for (const auto& c : candidates)
      if (c["bucket_bytes"] == chosen["bucket_bytes"] && c["first_bucket_bytes"] == chosen["first_bucket_bytes"])
        return c["step_ms"].get<double>();
    ADD_FAILURE() << "the chosen buckets are not a candidate: " << t.dump();
    return 0.0;
  }();
  if (t["default_kept"].get<bool>())
    EXPECT_LT(default_ms, margin * best) << t.dump();
  else
    EXPECT_TRUE(chosen_ms == best && default_ms >= margin * best) << t.dump();
  // training ran with the chosen buckets, and said so
  EXPECT_EQ(tuned["gradient_buckets"], chosen["buckets"]) << t.dump();
  EXPECT_NE(out.find("buckets     "), std::string::npos) << out;

  // the same run with the buckets given (no tuning) and the same compression choice: the timing
  // passes left nothing behind (weights, batch norm's statistics, generators), so the losses and
  // the saved model are equal bit for bit (on 2 ranks the buckets do not change the sums)
  const bool bf16 = tuned["gradient_compression"]["chosen"] == "bf16";
  ASSERT_EQ(testing::run_command(launch(2, "exec " + train + "--bucket-mb 25 --fast-paths " +
                                               (bf16 ? "compress_bf16" : "none") + " --json " + dir +
                                               "/given.json --save " + dir + "/given.pt"),
                                 &out),
            0)
      << out;
  const auto given = read_json(dir + "/given.json");
  EXPECT_FALSE(given.contains("gradient_bucket_tuning"));
  EXPECT_EQ(tuned["losses"], given["losses"]);
  const std::string saved = file_bytes(dir + "/tuned.pt");
  EXPECT_FALSE(saved.empty());
  EXPECT_TRUE(saved == file_bytes(dir + "/given.pt")) << "the saved models differ";
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

TEST(DistProcessTest, UnequalSharesOfTokenAndTextDataTrainEachRankItsPartOfEveryGlobalBatch) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_shares_tokens");
  {  // 3000 lines of 3-30 words: a byte-level corpus (tokens) and its documents (text)
    std::ofstream corpus(dir + "/corpus.txt");
    const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "stitch", "in", "time"};
    uint64_t state = 7;
    for (int line = 0; line < 3000; ++line) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int n = 3 + static_cast<int>((state >> 33) % 28);
      for (int w = 0; w < n; ++w) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        corpus << (w ? " " : "") << words[(state >> 33) % 12];
      }
      corpus << "\n";
    }
  }
  const std::string gpt = " train --model gpt --layers 1 --width 32 --heads 2 --seq-len 32 --vocab 256 --device cpu "
                          "--threads 1 --workers 0 --optimizer sgd --lr 0.05 --steps 10 --batch 8 --global-batch 32 ";
  for (const std::string kind : {"tokens", "text"}) {
    const std::string data = "--data " + kind + ":" + dir + "/corpus.txt ";
    std::string out;
    ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + gpt + data + "--shares 24,8 --json " + dir + "/" + kind +
                                                 "_ranks.json"),
                                   &out),
              0)
        << out;
    ASSERT_EQ(testing::run_command(launch(2, "exec " + kBin + gpt + data + "--json " + dir + "/" + kind + "_equal.json"),
                                   &out),
              0)
        << out;
    ASSERT_EQ(testing::run_command("timeout 300 " + kBin + gpt + data + "--json " + dir + "/" + kind + "_one.json -q",
                                   &out),
              0)
        << out;
    const auto ranks = read_json(dir + "/" + kind + "_ranks.json");
    const auto equal = read_json(dir + "/" + kind + "_equal.json");
    const auto one = read_json(dir + "/" + kind + "_one.json");
    ASSERT_EQ(ranks["ranks"].size(), 2u) << ranks.dump();
    EXPECT_EQ(ranks["ranks"][0]["share"].get<int64_t>(), 24) << kind;
    EXPECT_EQ(ranks["ranks"][0]["accumulation"].get<int64_t>(), 3) << kind;
    EXPECT_EQ(ranks["ranks"][1]["share"].get<int64_t>(), 8) << kind;
    EXPECT_EQ(ranks["ranks"][1]["accumulation"].get<int64_t>(), 1) << kind;
    EXPECT_EQ(ranks["samples_seen"], one["samples_seen"]) << kind;
    // token windows are all seq_len long: each rank's share-weighted mean is the one-process mean
    // of the same windows. Documents are padded: each rank's loss is a mean over its own real
    // tokens, and the ranks are weighted by their tokens (by their documents they were 0.04 %
    // apart with shares 24,8 and 0.01 % with equal shares); both equal one process to rounding
    const auto b = one["losses"].get<std::vector<double>>();
    ASSERT_EQ(b.size(), 10u);
    for (const auto* run : {&ranks, &equal}) {
      const auto a = (*run)["losses"].get<std::vector<double>>();
      ASSERT_EQ(a.size(), 10u);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::abs(b[i])) << kind << " step " << i;
    }
  }
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

TEST(DistProcessTest, TheThroughputObjectiveWithUnequalSharesGivesEachRankItsOwnKneeAndTrainsTheOneProcessCurve) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("dist_shares_objective");
  // rank 0 takes 192 and rank 1 64 of every 256 samples, budgets 48 and 24 MiB: each rank times its
  // own curve up to its share and trains at its knee; the split changes nothing in the step
  const std::string flags = "--steps 10 --global-batch 256 --shares 192,64 --batch auto --objective throughput "
                            "--memory-budget 48MiB,24MiB ";
  const auto [dist, single, out] =
      train_on_ranks_and_alone(dir, 2, kTrain + flags, kTrain + "--steps 10 --global-batch 256 --batch 64 ");
  ASSERT_TRUE(dist.contains("objective")) << dist.dump();
  const auto& o = dist["objective"];
  EXPECT_EQ(o["objective"].get<std::string>(), "throughput");
  EXPECT_NE(o["reason"].get<std::string>().find("rank 0's own curve up to its share 192"), std::string::npos)
      << o["reason"];
  ASSERT_EQ(dist["ranks"].size(), 2u) << dist.dump();
  const int64_t shares[] = {192, 64};
  for (int r = 0; r < 2; ++r) {
    const auto& row = dist["ranks"][static_cast<size_t>(r)];
    const int64_t micro = row["micro_batch"].get<int64_t>();
    EXPECT_EQ(row["share"].get<int64_t>(), shares[r]);
    EXPECT_GE(micro, 1);
    EXPECT_LE(micro, shares[r]) << "rank " << r << ": a micro-batch above its share";
    EXPECT_LE(micro, row["max_batch"].get<int64_t>());
    EXPECT_EQ(row["accumulation"].get<int64_t>(), (shares[r] + micro - 1) / micro);
  }
  // rank 0's knee is its curve's, which rank 0 reports
  EXPECT_EQ(dist["ranks"][0]["micro_batch"].get<int64_t>(), o["batch"].get<int64_t>());
  EXPECT_EQ(o["throughput_curve"]["points"].back()["batch"].get<int64_t>(), 192);  // timed up to its share
  expect_one_process_run(dist, dir + "/dist.pt", single, dir + "/single.pt", 10);
}

}  // namespace
}  // namespace saturate

// DDP with real processes on Gloo: the ranks' averaged gradients and trained parameters equal
// one process with the whole batch (double precision), and a rank killed mid-training makes the
// others fail within the timeout naming it.
// The parent tests (DistProcessTest.*) run only under ctest's `dist` label (SATURATE_DIST_TESTS=1);
// they start this same binary as ranks, filtered to DdpRankTest.*, which skips outside a rank.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "saturate/dist/bucket_tuning.h"
#include "saturate/dist/ddp.h"
#include "saturate/dist/ddp_sync.h"
#include "saturate/dist/launch.h"
#include "saturate/models/zoo.h"
#include "saturate/train/trainer.h"
#include "support/support.h"

extern char** environ;

namespace saturate {
namespace {

constexpr int64_t kInputs = 8, kOutputs = 4;
constexpr int64_t kLocalBatch = 6;  // per rank; micro-batches of 3 (accumulation 2)
constexpr int kTrainSteps = 200;

torch::nn::Sequential make_model(uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential m(torch::nn::Linear(kInputs, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                          torch::nn::Tanh(), torch::nn::Linear(16, kOutputs));
  m->to(torch::kDouble);
  return m;
}

struct Data {
  torch::Tensor x, y;
};
Data make_data(int64_t n) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(7);
  Data d;
  d.x = torch::randn({n, kInputs}, g, torch::kDouble);
  d.y = torch::randn({n, kOutputs}, g, torch::kDouble);
  return d;
}

/// One optimizer step's gradients over `x`,`y` in `micro` micro-batches (no_sync on all but the last).
void accumulate(torch::nn::Sequential& m, const torch::Tensor& x, const torch::Tensor& y, int64_t micro,
                DistributedDataParallel* ddp) {
  const int64_t n = x.size(0);
  for (int64_t s = 0; s < n; s += micro) {
    const int64_t k = std::min(micro, n - s);
    const bool last = s + k >= n;
    if (ddp && last) ddp->prepare_for_forward();
    torch::Tensor loss = torch::mse_loss(m->forward(x.slice(0, s, s + k)), y.slice(0, s, s + k)) *
                         (static_cast<double>(k) / static_cast<double>(n));
    if (ddp) ddp->backward(loss, /*sync=*/last);
    else loss.backward();
  }
}

std::vector<torch::Tensor> grads_of(torch::nn::Sequential& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m->parameters()) g.push_back(p.grad().clone());
  return g;
}
std::vector<torch::Tensor> params_of(torch::nn::Sequential& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m->parameters()) g.push_back(p.detach().clone());
  return g;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

std::unique_ptr<DistGroup> join(double timeout_s) {
  DistOptions o;
  o.backend = DistBackend::kGloo;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  return DistGroup::connect(read_dist_env(), o, /*cuda=*/false);
}

// ---- rank side ----------------------------------------------------------------------------

TEST(DdpRankTest, GradientsAndTraining) {
  const auto out = env("SATURATE_DDP_OUT");
  if (!env("RANK") || !out) GTEST_SKIP() << "runs as a rank of DistProcessTest";
  at::set_num_threads(1);
  auto group = join(30);
  const int rank = group->rank(), world = group->world_size();
  // rank 1 starts from different weights: the broadcast must fix that
  auto m = make_model(rank == 0 ? 1 : 99);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.1));
  DistributedDataParallel ddp(*m, *group, DdpOptions{/*bucket_bytes=*/512, /*first_bucket_bytes=*/256});
  ddp.broadcast_from_rank0();
  const Data d = make_data(kLocalBatch * world * kTrainSteps);
  const int64_t global = kLocalBatch * world;
  for (int step = 0; step < kTrainSteps; ++step) {
    const int64_t base = step * global + rank * kLocalBatch;
    sgd.zero_grad();
    accumulate(m, d.x.slice(0, base, base + kLocalBatch), d.y.slice(0, base, base + kLocalBatch), kLocalBatch / 2,
               &ddp);
    if (step == 0) torch::save(grads_of(m), *out + "/grads_" + std::to_string(rank) + ".pt");
    sgd.step();
    if (step == 0) torch::save(params_of(m), *out + "/step1_" + std::to_string(rank) + ".pt");
  }
  torch::save(params_of(m), *out + "/final_" + std::to_string(rank) + ".pt");
  const DdpStats s = ddp.stats();
  std::ofstream(*out + "/stats_" + std::to_string(rank) + ".txt")
      << s.synced_steps << " " << s.buckets << " " << s.allreduce_ms << " " << s.overlap_fraction() << "\n";
}

TEST(DdpRankTest, TrainUntilAPeerDies) {
  const auto out = env("SATURATE_DDP_KILL_OUT");
  if (!env("RANK") || !out) GTEST_SKIP() << "runs as a rank of DistProcessTest";
  at::set_num_threads(1);
  auto group = join(10);
  const int rank = group->rank();
  auto m = make_model(1);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.01));
  DistributedDataParallel ddp(*m, *group);
  ddp.broadcast_from_rank0();
  const Data d = make_data(64);
  std::string message = "no failure";
  try {
    for (int step = 0; step < 1000000; ++step) {
      sgd.zero_grad();
      accumulate(m, d.x, d.y, 64, &ddp);
      sgd.step();
      if (step == 5) std::ofstream(*out + "/running_" + std::to_string(rank)) << "1";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const RuntimeFailure& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not a RuntimeFailure: ") + e.what();
  }
  std::ofstream(*out + "/failure_" + std::to_string(rank)) << message;
}

// The Trainer with DDP: global batch 16 = 2 ranks x 8, micro-batch 4 (accumulation 2).
constexpr int64_t kTrainerGlobal = 16, kTrainerSteps = 300;

std::unique_ptr<Workload> trainer_workload() {
  ModelSpec s;
  s.name = "mlp";
  s.input_shape = {1, 6, 6};
  s.classes = 5;
  s.layers = 1;
  s.width = 24;
  s.seed = 3;
  return std::make_unique<Workload>(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kSgd, 0.05, 3);
}

Data trainer_data() {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(11);
  Data d;
  d.x = torch::randn({kTrainerGlobal * 20, 1, 6, 6}, g);
  d.y = torch::randint(0, 5, {kTrainerGlobal * 20}, g);
  return d;
}

std::vector<torch::Tensor> train_with_trainer(int rank, int world, StepSync* sync, std::vector<double>* losses) {
  auto w = trainer_workload();
  auto meter = make_memory_meter(torch::kCPU);
  const Data d = trainer_data();
  const int64_t local = kTrainerGlobal / world;
  std::vector<torch::Tensor> xs, ys;  // this rank's share of every global batch, in order
  for (int64_t s = 0; s < d.x.size(0) / kTrainerGlobal; ++s) {
    xs.push_back(d.x.slice(0, s * kTrainerGlobal + rank * local, s * kTrainerGlobal + (rank + 1) * local));
    ys.push_back(d.y.slice(0, s * kTrainerGlobal + rank * local, s * kTrainerGlobal + (rank + 1) * local));
  }
  TensorTrainData data(torch::cat(xs), torch::cat(ys), local);
  TrainOptions o;
  o.micro_batch = world > 1 ? local / 2 : local;
  o.max_steps = kTrainerSteps;
  o.schedule.peak_lr = 0.05;
  o.oom_backoff = false;
  o.sync = sync;
  Trainer t(*w, *meter, data, nullptr, o);
  const TrainResult r = t.run();
  if (losses) *losses = r.losses;
  std::vector<torch::Tensor> p;
  for (auto& x : w->model().parameters()) p.push_back(x.detach().clone());
  return p;
}

TEST(DdpRankTest, TrainerRun) {
  const auto out = env("SATURATE_DDP_TRAINER_OUT");
  if (!env("RANK") || !out) GTEST_SKIP() << "runs as a rank of DistProcessTest";
  at::set_num_threads(1);
  auto group = join(30);
  // every rank builds the same model; begin_run broadcasts rank 0's anyway
  const int rank = group->rank(), world = group->world_size();
  auto wl = trainer_workload();
  auto meter = make_memory_meter(torch::kCPU);
  const Data d = trainer_data();
  const int64_t local = kTrainerGlobal / world;
  std::vector<torch::Tensor> xs, ys;
  for (int64_t s = 0; s < d.x.size(0) / kTrainerGlobal; ++s) {
    xs.push_back(d.x.slice(0, s * kTrainerGlobal + rank * local, s * kTrainerGlobal + (rank + 1) * local));
    ys.push_back(d.y.slice(0, s * kTrainerGlobal + rank * local, s * kTrainerGlobal + (rank + 1) * local));
  }
  TensorTrainData data(torch::cat(xs), torch::cat(ys), local);
  std::vector<torch::Tensor> states;
  for (auto& [name, t] : wl->model().named_tensors()) states.push_back(t);
  DistributedDataParallel ddp(wl->model().parameters(), states, *group);
  DdpStepSync sync(ddp);
  TrainOptions o;
  o.micro_batch = local / 2;
  o.max_steps = kTrainerSteps;
  o.schedule.peak_lr = 0.05;
  o.oom_backoff = false;
  o.sync = &sync;
  Trainer t(*wl, *meter, data, nullptr, o);
  t.run();
  std::vector<torch::Tensor> p;
  for (auto& x : wl->model().parameters()) p.push_back(x.detach().clone());
  torch::save(p, *out + "/trainer_" + std::to_string(rank) + ".pt");
}

// ---- parent side --------------------------------------------------------------------------

#define SKIP_OUTSIDE_DIST_LABEL()                                                      \
  do {                                                                                 \
    if (!env("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist";  \
  } while (0)

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }
TEST(DdpRankTest, CompressedGradients) {
  const auto out = env("SATURATE_DDP_BF16_OUT");
  if (!env("RANK") || !out) GTEST_SKIP() << "runs as a rank of DistProcessTest";
  at::set_num_threads(1);
  auto group = join(30);
  const int rank = group->rank(), world = group->world_size();
  auto m = make_model(1);
  m->to(torch::kFloat);
  DdpOptions o;
  o.compress_bf16 = true;
  DistributedDataParallel ddp(*m, *group, o);
  const Data d = make_data(kLocalBatch * world);
  accumulate(m, d.x.slice(0, rank * kLocalBatch, (rank + 1) * kLocalBatch).to(torch::kFloat),
             d.y.slice(0, rank * kLocalBatch, (rank + 1) * kLocalBatch).to(torch::kFloat), kLocalBatch, &ddp);
  torch::save(grads_of(m), *out + "/grads_" + std::to_string(rank) + ".pt");
  std::ofstream(*out + "/bytes_" + std::to_string(rank) + ".txt") << ddp.stats().gradient_bytes << "\n";
}


std::vector<torch::Tensor> load_tensors(const std::string& path) {
  std::vector<torch::Tensor> t;
  torch::load(t, path);
  return t;
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = (a[i] - b[i]).abs().max().item<double>();
    EXPECT_LE(diff, tol) << what << " tensor " << i;
  }
}

TEST(DistProcessTest, DdpGradientsAndTrainingMatchOneProcessWithTheWholeBatch) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("ddp_equivalence");
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {self_exe(), "--gtest_filter=DdpRankTest.GradientsAndTraining"};
  o.extra_env = {{"SATURATE_DDP_OUT", dir}, {"OMP_NUM_THREADS", "1"}};
  std::string log;
  LaunchSinks sinks;
  sinks.rank_line = [&](int r, const std::string& l) { log += rank_prefix(r, 2, "h") + l + "\n"; };
  const LaunchResult r = launch(o, sinks);
  ASSERT_EQ(r.exit_status, 0) << r.summary << "\n" << log;

  // one process, the whole global batch, no accumulation
  const int world = 2;
  auto m = make_model(1);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.1));
  const Data d = make_data(kLocalBatch * world * kTrainSteps);
  const int64_t global = kLocalBatch * world;
  std::vector<torch::Tensor> grads0, step1;
  for (int step = 0; step < kTrainSteps; ++step) {
    sgd.zero_grad();
    accumulate(m, d.x.slice(0, step * global, (step + 1) * global), d.y.slice(0, step * global, (step + 1) * global),
               global, nullptr);
    if (step == 0) grads0 = grads_of(m);
    sgd.step();
    if (step == 0) step1 = params_of(m);
  }
  for (int rank = 0; rank < world; ++rank) {
    const std::string k = std::to_string(rank);
    expect_close(load_tensors(dir + "/grads_" + k + ".pt"), grads0, 1e-13, "averaged gradients, rank " + k);
    expect_close(load_tensors(dir + "/step1_" + k + ".pt"), step1, 1e-13, "parameters after one step, rank " + k);
    expect_close(load_tensors(dir + "/final_" + k + ".pt"), params_of(m), 1e-10,
                 "parameters after " + std::to_string(kTrainSteps) + " steps, rank " + k);
  }
  std::ifstream stats(dir + "/stats_0.txt");
  int64_t synced = 0, buckets = 0;
  double allreduce_ms = 0, overlap = -1;
  stats >> synced >> buckets >> allreduce_ms >> overlap;
  EXPECT_EQ(synced, kTrainSteps);
  EXPECT_GT(buckets, 1);  // small buckets: several per backward
  EXPECT_GT(allreduce_ms, 0);
  EXPECT_GE(overlap, 0);
  EXPECT_LE(overlap, 1);
}

TEST(DistProcessTest, CompressedDdpGradientsAreTheAverageRoundedToBf16AndHalfTheBytes) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("ddp_bf16");
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {self_exe(), "--gtest_filter=DdpRankTest.CompressedGradients"};
  o.extra_env = {{"SATURATE_DDP_BF16_OUT", dir}, {"OMP_NUM_THREADS", "1"}};
  const LaunchResult r = launch(o, {});
  ASSERT_EQ(r.exit_status, 0) << r.summary;
  // one float32 process, the whole batch: the exact average
  const int world = 2;
  auto m = make_model(1);
  m->to(torch::kFloat);
  const Data d = make_data(kLocalBatch * world);
  accumulate(m, d.x.to(torch::kFloat), d.y.to(torch::kFloat), kLocalBatch * world, nullptr);
  const std::vector<torch::Tensor> exact = grads_of(m), g0 = load_tensors(dir + "/grads_0.pt"),
                                   g1 = load_tensors(dir + "/grads_1.pt");
  // each rank's own gradient: bf16 rounds the halves, so the error scales with them, not with
  // their sum (which cancels to near zero in places)
  std::vector<torch::Tensor> halves(exact.size());
  for (int r = 0; r < world; ++r) {
    m->zero_grad();
    accumulate(m, d.x.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch).to(torch::kFloat),
               d.y.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch).to(torch::kFloat), kLocalBatch, nullptr);
    const auto local = grads_of(m);
    for (size_t i = 0; i < exact.size(); ++i)
      halves[i] = r == 0 ? local[i].abs() / world : halves[i] + local[i].abs() / world;
  }
  ASSERT_EQ(g0.size(), exact.size());
  double worst = 0, largest_diff = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    EXPECT_TRUE(torch::equal(g0[i], g1[i])) << "both ranks hold the same all-reduced gradient, tensor " << i;
    EXPECT_EQ(g0[i].scalar_type(), torch::kFloat) << "the gradients stay float32";
    EXPECT_TRUE(torch::equal(g0[i].to(torch::kBFloat16).to(torch::kFloat), g0[i]))
        << "tensor " << i << " holds values bf16 cannot: the all-reduce was not compressed";
    // bf16 keeps 8 significant bits: each rank's half rounded, their sum rounded again
    const torch::Tensor diff = (g0[i] - exact[i]).abs();
    const torch::Tensor bound = halves[i] * (3.0 / 256) + 1e-7;
    worst = std::max(worst, (diff / bound).max().item<double>());
    largest_diff = std::max(largest_diff, diff.max().item<double>());
    bytes += exact[i].numel() * 2;
  }
  EXPECT_LE(worst, 1.0) << "a gradient farther from the exact average than bf16 rounding allows";
  EXPECT_GT(largest_diff, 0);
  std::ifstream f(dir + "/bytes_0.txt");
  int64_t sent = 0;
  f >> sent;
  EXPECT_EQ(sent, bytes) << "bytes all-reduced per step: 2 a float32 gradient";
}

pid_t spawn_rank(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);
  for (const auto& [k, v] : extra) envs.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> a = args;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  return pid;
}

TEST(DistProcessTest, KillingARankMidTrainingMakesTheOthersFailNamingIt) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("ddp_kill");
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 3; ++rank)
    pids.push_back(spawn_rank({self_exe(), "--gtest_filter=DdpRankTest.TrainUntilAPeerDies"},
                              {{"RANK", std::to_string(rank)},
                               {"WORLD_SIZE", "3"},
                               {"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", std::to_string(port)},
                               {"OMP_NUM_THREADS", "1"},
                               {"SATURATE_DDP_KILL_OUT", dir}}));
  for (pid_t p : pids) ASSERT_GT(p, 0);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (!std::filesystem::exists(dir + "/running_1") && elapsed() < 40)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(std::filesystem::exists(dir + "/running_1")) << "rank 1 never trained";
  kill(pids[1], SIGKILL);
  int status = 0;
  waitpid(pids[1], &status, 0);  // reaped: the others must find it gone, not a zombie
  const auto killed_at = std::chrono::steady_clock::now();
  for (int rank : {0, 2}) {
    // each survivor must end within the timeout (10 s) plus start-up slack, never hang
    bool ended = false;
    while (std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30)) {
      if (waitpid(pids[static_cast<size_t>(rank)], &status, WNOHANG) == pids[static_cast<size_t>(rank)]) {
        ended = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ended) {
      kill(pids[static_cast<size_t>(rank)], SIGKILL);
      waitpid(pids[static_cast<size_t>(rank)], &status, 0);
    }
    EXPECT_TRUE(ended) << "rank " << rank << " hung after rank 1 was killed";
    std::ifstream f(dir + "/failure_" + std::to_string(rank));
    const std::string message((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(message.find("rank 1 (pid " + std::to_string(pids[1])), std::string::npos)
        << "rank " << rank << ": " << message;
  }
}


TEST(DistProcessTest, DdpTrainerMatchesOneProcessWithTheSameGlobalBatch) {
  SKIP_OUTSIDE_DIST_LABEL();
  const std::string dir = testing::temp_dir("ddp_trainer");
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {self_exe(), "--gtest_filter=DdpRankTest.TrainerRun"};
  o.extra_env = {{"SATURATE_DDP_TRAINER_OUT", dir}, {"OMP_NUM_THREADS", "1"}};
  std::string log;
  LaunchSinks sinks;
  sinks.rank_line = [&](int r, const std::string& l) { log += rank_prefix(r, 2, "h") + l + "\n"; };
  const LaunchResult r = launch(o, sinks);
  ASSERT_EQ(r.exit_status, 0) << r.summary << "\n" << log;
  at::set_num_threads(1);
  std::vector<double> losses;
  const auto single = train_with_trainer(0, 1, nullptr, &losses);
  ASSERT_EQ(losses.size(), static_cast<size_t>(kTrainerSteps));
  EXPECT_LT(losses.back(), losses.front());
  for (int rank = 0; rank < 2; ++rank)
    expect_close(load_tensors(dir + "/trainer_" + std::to_string(rank) + ".pt"), single, 1e-4,
                 "Trainer parameters after " + std::to_string(kTrainerSteps) + " steps, rank " + std::to_string(rank));
}

}  // namespace
}  // namespace saturate

namespace saturate {
namespace {

int64_t bytes_of(const std::vector<torch::Tensor>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += static_cast<int64_t>(p.nbytes());
  return n;
}

TEST(BucketTuning, TheCandidatesAreTheDefaultOneBucketAndSmallerOnesWithoutTwoThatBuildTheSameBuckets) {
  torch::manual_seed(0);
  // 6 layers of 256 x 256: 1.5 MiB of gradients in 12 tensors
  torch::nn::Sequential model;
  for (int i = 0; i < 6; ++i) model->push_back(torch::nn::Linear(256, 256));
  const auto params = model->parameters();
  const int64_t gradient = bytes_of(params);
  const auto candidates = bucket_candidates(gradient, DdpOptions{});
  ASSERT_GE(candidates.size(), 3u);
  EXPECT_TRUE(candidates[0].is_default);
  EXPECT_EQ(candidates[0].first_bucket_bytes, int64_t{1} << 20);
  EXPECT_EQ(candidates[0].bucket_bytes, int64_t{25} << 20);
  EXPECT_EQ(std::count_if(candidates.begin(), candidates.end(), [](const BucketCandidate& c) { return c.is_default; }), 1);
  // one bucket holds every gradient; the smaller ones make more buckets than the default's two
  std::vector<size_t> counts;
  for (const BucketCandidate& c : candidates) {
    DdpOptions o;
    o.first_bucket_bytes = c.first_bucket_bytes;
    o.bucket_bytes = c.bucket_bytes;
    counts.push_back(ddp_bucket_assignment(params, o).size());
  }
  EXPECT_EQ(counts[0], 2u);  // 1 MiB first (a bucket closes at the limit), then the rest
  EXPECT_NE(std::find(counts.begin(), counts.end(), 1u), counts.end());
  EXPECT_GT(*std::max_element(counts.begin(), counts.end()), 3u);
  // every parameter in exactly one bucket, in each candidate
  for (const BucketCandidate& c : candidates) {
    DdpOptions o;
    o.first_bucket_bytes = c.first_bucket_bytes;
    o.bucket_bytes = c.bucket_bytes;
    std::vector<size_t> all;
    for (const auto& b : ddp_bucket_assignment(params, o)) all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), params.size());
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
  }
  // a tiny model: no bucket under 64 KiB, and sizes that build the same buckets come once
  const auto tiny = bucket_candidates(4096, DdpOptions{});
  for (const BucketCandidate& c : tiny) EXPECT_GE(c.bucket_bytes, 4096);
  for (size_t i = 0; i < tiny.size(); ++i)
    for (size_t j = i + 1; j < tiny.size(); ++j)
      EXPECT_FALSE(tiny[i].first_bucket_bytes == tiny[j].first_bucket_bytes && tiny[i].bucket_bytes == tiny[j].bucket_bytes);
}

}  // namespace
}  // namespace saturate

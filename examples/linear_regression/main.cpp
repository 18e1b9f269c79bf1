// The seed's worked example (M11): one linear-regression model trained four ways —
// 1 process; DataParallel over the visible GPUs (when there are any); DDP with 2 and 4
// processes (Gloo on CPU, NCCL on GPUs) — printing one table: samples/s, step time,
// communication time and final loss. Every run sees the same global batches in the same order,
// so the final losses agree; what changes is the time.
//
//   linear_regression [--steps 300] [--global-batch 256] [--features 512] [--ranks 1,2,4]
//
// The parent starts the DDP runs through saturate's launcher (this same binary, as ranks).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/nn/parallel/data_parallel.h>
#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/dist/ddp.h"
#include "saturate/dist/launch.h"

namespace {

struct Config {
  int64_t steps = 300;
  int64_t global_batch = 256;
  int64_t features = 512;
  std::vector<int> ranks = {2, 4};
};

struct Row {
  std::string mode;
  int processes = 1;
  double samples_per_s = 0, step_ms = 0, comm_ms = 0, overlap = 0, final_loss = 0;
};

/// Global batch `step`: features x and targets y = x w* + 0.5 + noise, from (seed, step) only.
std::pair<torch::Tensor, torch::Tensor> batch_for(int64_t step, const Config& c) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(1000 + static_cast<uint64_t>(step));
  auto wg = torch::make_generator<at::CPUGeneratorImpl>(42);
  const torch::Tensor w = torch::randn({c.features, 1}, wg) / std::sqrt(static_cast<double>(c.features));
  torch::Tensor x = torch::randn({c.global_batch, c.features}, g);
  torch::Tensor y = x.matmul(w) + 0.5 + 0.01 * torch::randn({c.global_batch, 1}, g);
  return {x, y};
}

Row train(const Config& c, int rank, int world, saturate::DistGroup* group, const torch::Device& device,
          bool data_parallel) {
  torch::manual_seed(0);
  torch::nn::Linear model(c.features, 1);
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));
  std::unique_ptr<saturate::DistributedDataParallel> ddp;
  if (group) {
    ddp = std::make_unique<saturate::DistributedDataParallel>(*model, *group);
    ddp->broadcast_from_rank0();
  }
  const int64_t local = c.global_batch / world;
  double loss_value = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < c.steps; ++step) {
    auto [x, y] = batch_for(step, c);
    x = x.slice(0, rank * local, (rank + 1) * local).to(device);
    y = y.slice(0, rank * local, (rank + 1) * local).to(device);
    sgd.zero_grad();
    torch::Tensor out = data_parallel ? torch::nn::parallel::data_parallel(model, x) : model->forward(x);
    torch::Tensor loss = torch::mse_loss(out, y);
    if (ddp) {
      ddp->prepare_for_forward();
      ddp->backward(loss, /*sync=*/true);
    } else {
      loss.backward();
    }
    sgd.step();
    if (step + 1 == c.steps) loss_value = loss.item<double>();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Row r;
  r.processes = world;
  r.samples_per_s = static_cast<double>(c.steps * c.global_batch) / seconds;
  r.step_ms = seconds * 1000.0 / static_cast<double>(c.steps);
  if (ddp) {
    const auto s = ddp->stats();
    r.comm_ms = s.allreduce_ms / static_cast<double>(c.steps);
    r.overlap = s.overlap_fraction();
  }
  r.final_loss = loss_value;
  return r;
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--steps") c.steps = std::stoll(v);
    else if (k == "--global-batch") c.global_batch = std::stoll(v);
    else if (k == "--features") c.features = std::stoll(v);
    else if (k == "--ranks") {
      c.ranks.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) c.ranks.push_back(std::stoi(item));
    } else {
      std::cerr << "linear_regression: unknown option " << k << "\n";
      std::exit(2);
    }
  }
  return c;
}

std::string row_text(const Row& r) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "| %-16s | %9d | %10.0f | %12.3f | %11.3f | %8.0f %% | %10.6f |", r.mode.c_str(),
                r.processes, r.samples_per_s, r.step_ms, r.comm_ms, r.overlap * 100, r.final_loss);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  saturate::install_cpu_budget_allocator();
  const Config c = parse(argc, argv);
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (const char* rank_out = std::getenv("LINREG_OUT"); rank_out && std::getenv("RANK")) {
    // a rank of a DDP run
    at::set_num_threads(1);
    saturate::DistOptions o;
    const saturate::DistEnv env = saturate::read_dist_env();
    const torch::Device d = device.is_cuda() ? torch::Device(torch::kCUDA, env.local_rank) : device;
    auto group = saturate::DistGroup::connect(env, o, d.is_cuda(), d.is_cuda() ? env.local_rank : 0);
    Row r = train(c, env.rank, env.world_size, group.get(), d, false);
    // the final loss over the whole global batch: every rank's local loss, averaged
    const auto losses = group->all_gather({static_cast<int64_t>(r.final_loss * 1e12)});
    double sum = 0;
    for (int64_t v : losses) sum += static_cast<double>(v) / 1e12;
    r.final_loss = sum / static_cast<double>(losses.size());
    if (env.rank == 0)
      std::ofstream(rank_out) << r.samples_per_s << " " << r.step_ms << " " << r.comm_ms << " " << r.overlap << " "
                              << r.final_loss << "\n";
    return 0;
  }
  std::vector<Row> rows;
  at::set_num_threads(1);
  Row one = train(c, 0, 1, nullptr, device, false);
  one.mode = "1 process";
  rows.push_back(one);
  if (device.is_cuda() && torch::cuda::device_count() > 1) {
    Row dp = train(c, 0, 1, nullptr, device, true);
    dp.mode = "DataParallel";
    dp.processes = 1;
    rows.push_back(dp);
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int n : c.ranks) {
    const std::string out = std::filesystem::temp_directory_path() / ("linreg_" + std::to_string(getpid()) + ".txt");
    saturate::LaunchOptions o;
    o.nproc_per_node = n;
    o.command = {self};
    for (int i = 1; i < argc; ++i) o.command.push_back(argv[i]);
    o.extra_env = {{"LINREG_OUT", out}, {"OMP_NUM_THREADS", "1"}};
    saturate::LaunchSinks sinks;
    sinks.rank_line = [n](int r, const std::string& l) { std::cerr << saturate::rank_prefix(r, n, "") << l << "\n"; };
    const auto res = saturate::launch(o, sinks);
    if (res.exit_status != 0) {
      std::cerr << "linear_regression: DDP with " << n << " processes failed: " << res.summary << "\n";
      return 1;
    }
    Row r;
    r.mode = "DDP (" + std::string(device.is_cuda() ? "nccl" : "gloo") + ")";
    r.processes = n;
    std::ifstream f(out);
    f >> r.samples_per_s >> r.step_ms >> r.comm_ms >> r.overlap >> r.final_loss;
    std::filesystem::remove(out);
    rows.push_back(r);
  }
  std::cout << "linear regression: " << c.features << " features, global batch " << c.global_batch << ", " << c.steps
            << " steps, " << (device.is_cuda() ? "CUDA" : "CPU") << "\n\n";
  std::cout << "| mode             | processes |  samples/s | step time ms | comm ms/step |  overlap | final loss |\n";
  std::cout << "|------------------|-----------|------------|--------------|--------------|----------|------------|\n";
  for (const Row& r : rows) std::cout << row_text(r) << "\n";
  return 0;
}

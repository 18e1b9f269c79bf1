#include "dist_flags.h"
#include "flag_checks.h"

#include <algorithm>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/models/zoo.h"

namespace saturate::cli {

void add_dist_flags(CLI::App& app, DistFlags& f, bool search) {
  app.add_option("--backend", f.backend,
                 "process group when started as several ranks (saturate launch, torchrun, mpirun, srun): "
                 "auto (nccl on CUDA, gloo on CPU) | nccl | gloo")
      ->capture_default_str()
      ->envname("SATURATE_BACKEND");
  app.add_option("--dist-timeout", f.timeout_s,
                 "seconds a rendezvous or collective waits for the other ranks before failing")->check(in_range(0.1, 604800, "seconds"))
      ->capture_default_str()
      ->envname("SATURATE_DIST_TIMEOUT");
  if (search)
    app.add_flag("!--no-rank-max", f.rank_max_exact,
                 "with unequal ranks, skip the local search that finds each larger rank's own max exactly");
  if (!search) {
    app.add_option("--bucket-mb", f.bucket_mb, "DDP gradient bucket size in MiB (several ranks)")->check(in_range(0.001, 1048576, "MiB"))->capture_default_str();
    app.add_option("--parallel", f.parallel,
                   "ddp: several ranks (saturate launch, torchrun) train with DistributedDataParallel | dp: "
                   "DataParallel in one process over the visible GPUs")
        ->capture_default_str();
  }
}

DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w) {
  (void)parse_dist_backend(f.backend);
  if (!(f.timeout_s > 0))
    throw UsageError(fmt::format("--dist-timeout: {} is not a positive number of seconds (e.g. 300)", f.timeout_s));
  DistEnv env = read_dist_env();
  if (env.distributed() && (w.device == "cuda" || (w.device == "auto" && cuda_available())))
    w.device = fmt::format("cuda:{}", env.local_rank);
  return env;
}

std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device) {
  if (!env.distributed()) return nullptr;
  DistOptions o;
  o.backend = parse_dist_backend(f.backend);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  return DistGroup::connect(env, o, device.is_cuda(), device.is_cuda() ? device.index() : 0);
}

}  // namespace saturate::cli

// ---- train ----------------------------------------------------------------------------------

namespace saturate::cli {

TrainRanks prepare_train_ranks(const DistFlags& f, WorkloadFlags& w) {
  if (!(f.bucket_mb > 0))
    throw UsageError(fmt::format("--bucket-mb: {} is not a positive size in MiB (PyTorch's default is 25)", f.bucket_mb));
  if (f.parallel != "ddp" && f.parallel != "dp")
    throw UsageError(fmt::format("--parallel: unknown value '{}' (expected ddp or dp)", f.parallel));
  TrainRanks ranks;
  ranks.env = prepare_dist(f, w);
  if (f.parallel == "dp") {
    const int gpus = cuda_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    if (ranks.env.distributed())
      throw UsageError(fmt::format("--parallel dp: DataParallel runs in one process over the visible GPUs, and this "
                                   "process is rank {} of {}; start it without saturate launch/torchrun, or drop "
                                   "--parallel dp (several ranks train with DDP)",
                                   ranks.env.rank, ranks.env.world_size));
    if (gpus == 0)
      throw UsageError("--parallel dp: DataParallel replicates the model over the visible GPUs, and this machine has "
                       "none (CUDA devices: 0); drop --parallel dp to train on one device, or start ranks with "
                       "`saturate launch --nproc-per-node N -- saturate train ...` (DDP, Gloo on CPUs)");
    if (w.device == "cpu")
      throw UsageError("--parallel dp with --device cpu: DataParallel replicates over GPUs; use --device cuda");
    for (int i = 0; i < gpus; ++i) ranks.dp_devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
  }
  return ranks;
}

void setup_data_parallel(TrainRanks& ranks, Workload& workload, TrainOptions& o) {
  if (ranks.dp_devices.empty()) return;
  if (o.checkpointing.enabled())
    throw UsageError("--parallel dp with --checkpointing: DataParallel runs the replicas whole; use --checkpointing "
                     "none, or DDP (saturate launch --nproc-per-node N) with checkpointing");
  DataParallelModel* dp = nullptr;
  workload.wrap_model([&](std::unique_ptr<Model> master) {
    std::vector<std::unique_ptr<Model>> replicas;
    for (size_t i = 1; i < ranks.dp_devices.size(); ++i) replicas.push_back(build_model(workload.built().spec).model);
    auto m = std::make_unique<DataParallelModel>(std::move(master), std::move(replicas), ranks.dp_devices);
    dp = m.get();
    return m;
  });
  ranks.dp_sync = std::make_unique<DataParallelSync>(*dp);
  o.sync = ranks.dp_sync.get();
}

void connect_train_ranks(TrainRanks& ranks, const DistFlags& f, const c10::Device& device) {
  ranks.group = open_dist(f, ranks.env, device);
}

void setup_train_ranks(TrainRanks& ranks, const DistFlags& f, Model& model, LoaderOptions& loader, TrainOptions& o) {
  if (!ranks.group) return;
  // rank r reads positions r, r + world, ... of the same per-epoch permutation: together the
  // ranks' step-k batches are exactly the one-process global batch k; padded so every rank
  // has as many steps when the world size does not divide the dataset
  loader.shard.rank = ranks.rank();
  loader.shard.world_size = ranks.world_size();
  loader.shard.pad = true;
  std::vector<torch::Tensor> states;
  for (auto& [name, t] : model.named_tensors()) states.push_back(t);
  DdpOptions d;
  d.bucket_bytes = static_cast<int64_t>(f.bucket_mb * 1024 * 1024);
  d.first_bucket_bytes = std::min<int64_t>(d.first_bucket_bytes, d.bucket_bytes);
  ranks.ddp = std::make_unique<DistributedDataParallel>(model.parameters(), std::move(states), *ranks.group, d);
  ranks.sync = std::make_unique<DdpStepSync>(*ranks.ddp);
  o.sync = ranks.sync.get();
  o.write_checkpoints = ranks.writer();
}

void add_train_rank_json(nlohmann::json& j, TrainRanks& ranks) {
  j["world_size"] = ranks.world_size();
  j["parallel"] = ranks.dp_devices.empty() ? (ranks.ddp ? "ddp" : "none") : "dp";
  j["data_parallel_devices"] = ranks.dp_devices.size();
  if (!ranks.ddp) {
    j.update({{"backend", "none"}, {"allreduce_ms", 0.0}, {"allreduce_overlap_fraction", nullptr},
              {"gradient_buckets", 0}, {"gradient_bytes", 0}});
    return;
  }
  const DdpStats s = ranks.ddp->stats();
  j.update({{"backend", to_string(ranks.group->backend())},
            {"allreduce_ms", s.synced_steps > 0 ? s.allreduce_ms / static_cast<double>(s.synced_steps) : 0.0},
            {"allreduce_overlap_fraction", s.overlap_fraction()},
            {"gradient_buckets", s.buckets},
            {"gradient_bytes", s.gradient_bytes}});
}

}  // namespace saturate::cli

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
  TrainRanksOptions o;
  o.timeout_s = f.timeout_s;
  o.bucket_mb = f.bucket_mb;
  o.parallel = f.parallel;
  o.check();
  DistEnv env = prepare_dist(f, w);
  o.backend = parse_dist_backend(f.backend);
  return TrainRanks(o, std::move(env), w.device);
}

}  // namespace saturate::cli

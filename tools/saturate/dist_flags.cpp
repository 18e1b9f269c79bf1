#include "dist_flags.h"

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/data/batch_plan.h"

namespace saturate::cli {

void add_dist_flags(CLI::App& app, DistFlags& f, bool search) {
  add_option_flag(app, "backend", f.backend);
  add_option_flag(app, "dist_timeout", f.timeout_s);
  if (search) add_option_flag(app, "rank_max_exact", f.rank_max_exact);
  if (!search) {
    add_option_flag(app, "bucket_mb", f.bucket_mb);
    add_option_flag(app, "parallel", f.parallel);
    add_option_flag(app, "shares", f.shares);
    add_option_flag(app, "reshare_every", f.share_balance.every_steps);
    add_option_flag(app, "reshare_min_gain", f.share_balance.min_gain);
  }
}

DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w) {
  (void)parse_dist_backend(f.backend);
  DistEnv env = read_dist_env();
  if (env.distributed() && (w.o.device == "cuda" || (w.o.device == "auto" && cuda_available())))
    w.o.device = fmt::format("cuda:{}", env.local_rank);
  return env;
}

std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device) {
  if (!env.distributed()) return nullptr;
  DistOptions o;
  o.backend = parse_dist_backend(f.backend);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  return DistGroup::connect(env, o, device.is_cuda(), device.is_cuda() ? device.index() : 0);
}

TrainRanks prepare_train_ranks(const DistFlags& f, WorkloadFlags& w, const StepSettings& step) {
  TrainRanksOptions o;
  o.measure_compression = step.measures_compression();
  o.timeout_s = f.timeout_s;
  o.bucket_mb = f.bucket_mb;
  o.parallel = f.parallel;
  o.shares = parse_shares(f.shares);
  o.share_balance = f.share_balance;
  o.check();
  DistEnv env = prepare_dist(f, w);
  o.backend = parse_dist_backend(f.backend);
  return TrainRanks(o, std::move(env), w.o.device);
}

}  // namespace saturate::cli

#include "saturate/session/train_ranks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "core/statistics.h"
#include "saturate/models/zoo.h"
#include "saturate/step/model_snapshot.h"
#include "saturate/step/training_step.h"

namespace saturate {

void TrainRanksOptions::check() const {
  if (!(timeout_s > 0))
    throw UsageError("dist_timeout", fmt::format("{} is not a positive number of seconds (e.g. 300)", timeout_s));
  if (!(min_compression_speedup >= 1))
    throw UsageError("min_compression_speedup", fmt::format("{} is below 1 (a compressed all-reduce must be at least as "
                                                            "fast as the float32 one)", min_compression_speedup));
  if (!(bucket_mb >= 0))  // 0: not given
    throw UsageError("bucket_mb", fmt::format("{} is not a positive size in MiB (PyTorch's default is 25)", bucket_mb));
  if (!(min_bucket_speedup >= 1))
    throw UsageError("min_bucket_speedup", fmt::format("{} is below 1 (other buckets must be at least as fast as "
                                                       "PyTorch's default)", min_bucket_speedup));
  if (share_balance.every_steps.value_or(0) < 0)
    throw UsageError("reshare_every", fmt::format("{} is negative; give a number of steps, or 0 to keep the shares "
                                                  "split before training", *share_balance.every_steps));
  if (!(share_balance.min_gain >= 1))
    throw UsageError("reshare_min_gain", fmt::format("{} is below 1 (a re-split must be predicted faster)",
                                                     share_balance.min_gain));
  if (parallel != "ddp" && parallel != "dp")
    throw UsageError("parallel", fmt::format("unknown value '{}' (expected ddp or dp)", parallel));
  // re-splitting starts from unequal shares: measured (auto) or given; a flag that would not act is refused
  if (share_balance.every_steps.value_or(0) > 0 && !shares.given())
    throw UsageError("reshare_every", "re-splits unequal shares while training, and no shares are given; give "
                                      "`shares` auto (split by speed before training), or the split to start from "
                                      "(e.g. 48,48), or leave `reshare_every` out");
  if (share_balance.min_gain != ShareBalanceOptions{}.min_gain && resplits() == 0)
    throw UsageError("reshare_min_gain", "decides the re-splits of the shares while training, and none are made; give "
                                         "`shares` auto, or shares with `reshare_every`, or leave it out");
}

TrainRanks::TrainRanks(const TrainRanksOptions& options, DistEnv env, const std::string& device)
    : options_(options), env_(std::move(env)) {
  options_.check();
  shares_ = options_.shares.counts;
  if (!shares_.empty() && static_cast<int>(shares_.size()) != std::max(1, env_.world_size))
    throw UsageError("shares", fmt::format("{} values for {} rank(s); give one share per rank (each rank's samples of "
                                           "every global batch), or leave `shares` out for equal shares",
                                           shares_.size(), std::max(1, env_.world_size)));
  if (options_.shares.given() && options_.parallel == "dp")
    throw UsageError("shares", "`parallel` dp splits each batch over the GPUs in one process; `shares` are for DDP "
                               "ranks (saturate launch, torchrun)");
  if (options_.parallel != "dp") return;
  const int gpus = cuda_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (env_.distributed())
    throw UsageError(fmt::format("`parallel` dp: DataParallel runs in one process over the visible GPUs, and this "
                                 "process is rank {} of {}; start it without a launcher (saturate launch, torchrun), "
                                 "or drop `parallel` dp (several ranks train with DDP)",
                                 env_.rank, env_.world_size));
  if (gpus == 0)
    throw UsageError("`parallel` dp: DataParallel replicates the model over the visible GPUs, and this machine has "
                     "none (CUDA devices: 0); drop `parallel` dp to train on one device, or start ranks with a "
                     "launcher (saturate launch, torchrun: DDP, Gloo on CPUs)");
  if (device == "cpu")
    throw UsageError("`parallel` dp with `device` cpu: DataParallel replicates over GPUs; use `device` cuda");
  for (int i = 0; i < gpus; ++i) dp_devices_.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
}

void TrainRanks::set_shares(std::vector<int64_t> shares, std::vector<double> measured_samples_per_s) {
  if (static_cast<int>(shares.size()) != world_size())
    throw InternalError(fmt::format("{} shares for {} ranks", shares.size(), world_size()));
  shares_ = std::move(shares);
  measured_samples_per_s_ = std::move(measured_samples_per_s);
}

void TrainRanks::connect(const c10::Device& device) {
  if (!env_.distributed()) return;
  DistOptions o;
  o.backend = options_.backend;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
  group_ = DistGroup::connect(env_, o, device.is_cuda(), device.is_cuda() ? device.index() : 0);
}

namespace {
int64_t trainable_bytes(Model& model) {
  int64_t bytes = 0;
  for (const torch::Tensor& p : model.parameters())
    if (p.requires_grad()) bytes += p.numel() * static_cast<int64_t>(p.element_size());
  return bytes;
}
}  // namespace

void TrainRanks::measure_network_once(Workload& workload, bool compression_named) {
  if (!group_ || network_) return;
  // the network between the ranks, at the gradients' size (up to 4 MiB), before the first step;
  // the bf16 all-reduce too when compression is named or to be decided
  const bool named = compression_named;
  network_ = measure_network(*group_, workload.device(), trainable_bytes(workload.model()),
                             named || options_.measure_compression);
  // every rank decides on the same number: the ranks' mean speedup (their own timings differ)
  if (named || options_.measure_compression) {
    compression_speedup_ = group_->all_reduce_sum({network_->compression_speedup()})[0] / world_size();
    compress_bf16_ = compression_speedup_ >= options_.min_compression_speedup;
  }
  compress_bf16_ = compress_bf16_ || named;
  compression_by_ = named ? "named" : options_.measure_compression ? "measured" : "";
}

double TrainRanks::step_allreduce_ms(Workload& workload, bool compression_named) {
  measure_network_once(workload, compression_named);
  if (!network_) return 0;
  // DDP's buckets: a first one of 1 MiB, then bucket_mb each; bf16 halves the bytes
  const int64_t bytes = trainable_bytes(workload.model()) / (compress_bf16_ ? 2 : 1);
  const int64_t bucket = bucket_bytes();
  // every rank's decisions must agree (the adaptive batch's goodput): the ranks' mean prediction
  return group_->all_reduce_sum({network_->predicted_ddp_ms(bytes, bucket)})[0] / world_size();
}

void TrainRanks::setup(Workload& workload, LoaderOptions& loader, TrainOptions& train) {
  if (train.fast_paths.compress_bf16 && !group_)
    throw UsageError("fast_paths", fmt::format("compress_bf16 all-reduces the gradients between DDP ranks in bf16, and "
                                               "this run has {}; start ranks with a launcher (saturate launch, "
                                               "torchrun), or drop compress_bf16",
                                               dp_devices_.empty() ? "one process" : "DataParallel in one process"));
  if (group_) {
    // together the ranks' step-k batches are exactly the one-process global batch k; padded so
    // every rank has as many steps when the world size does not divide the dataset
    loader.shard.rank = rank();
    loader.shard.world_size = world_size();
    loader.shard.pad = true;
    loader.shard.shares = shares_;  // unequal shares: each rank its part of every global batch
    Model& model = workload.model();
    std::vector<torch::Tensor> states;
    for (auto& [name, t] : model.named_tensors()) states.push_back(t);
    measure_network_once(workload, train.fast_paths.compress_bf16);
    train.fast_paths.compress_bf16 = compress_bf16_;  // the summary's fast paths say it
    DdpOptions d;
    d.bucket_bytes = bucket_bytes();
    d.first_bucket_bytes = std::min<int64_t>(d.first_bucket_bytes, d.bucket_bytes);
    d.compress_bf16 = compress_bf16_;
    if (!shares_.empty()) {  // each rank's mean gradient weighted by its share of the batch
      int64_t global = 0;
      for (int64_t s : shares_) global += s;
      d.gradient_weight = static_cast<double>(shares_[static_cast<size_t>(rank())]) / static_cast<double>(global);
    }
    if (options_.measure_compression && options_.bucket_mb == 0) tune_buckets_for(workload, train, d);
    ddp_ = std::make_unique<DistributedDataParallel>(model.parameters(), std::move(states), *group_, d);
    sync_ = std::make_unique<DdpStepSync>(*ddp_);
    train.sync = sync_.get();
    train.write_checkpoints = writer();
  }
  if (dp_devices_.empty()) return;
  if (train.checkpointing.enabled())
    throw UsageError("`parallel` dp with `checkpointing`: DataParallel runs the replicas whole; use `checkpointing` "
                     "none, or DDP (several ranks, e.g. saturate launch) with checkpointing");
  DataParallelModel* dp = nullptr;
  workload.wrap_model([&](std::unique_ptr<Model> master) {
    std::vector<std::unique_ptr<Model>> replicas;
    for (size_t i = 1; i < dp_devices_.size(); ++i) replicas.push_back(build_model(workload.built().spec).model);
    auto m = std::make_unique<DataParallelModel>(std::move(master), std::move(replicas), dp_devices_);
    dp = m.get();
    return m;
  });
  dp_sync_ = std::make_unique<DataParallelSync>(*dp);
  train.sync = dp_sync_.get();
}

int64_t TrainRanks::bucket_bytes() const {
  return options_.bucket_mb > 0 ? static_cast<int64_t>(options_.bucket_mb * 1024 * 1024) : int64_t{25} << 20;
}

void TrainRanks::tune_buckets_for(Workload& workload, const TrainOptions& train, DdpOptions& ddp) {
  Model& model = workload.model();
  ModelSnapshot before(model, workload.device());  // the passes move buffers and draw random numbers
  StepOptions so;
  so.step_config() = train.step_config();  // the step training runs
  so.micro_batch = train.micro_batch;
  TrainingStep step(workload, so);
  const Batch batch = workload.synthetic_batch(std::max<int64_t>(train.micro_batch, 1), workload.device());
  BucketTuningOptions bo;
  bo.min_speedup = options_.min_bucket_speedup;
  bucket_tuning_ = tune_buckets(
      model.parameters(), *group_, ddp, [&] { return workload.loss(step.forward(batch.inputs), batch.targets); }, bo);
  before.restore();
  ddp.first_bucket_bytes = bucket_tuning_->chosen_candidate().first_bucket_bytes;
  ddp.bucket_bytes = bucket_tuning_->chosen_candidate().bucket_bytes;
}

namespace {
/// Per-step times of every rank (a collective): the mean over steps of the least rank's time, and
/// each rank's mean excess over it (every rank recorded the same steps; a shorter list, never
/// expected, is padded with "not seen").
struct AcrossRanks {
  double least_ms = 0;
  std::vector<double> excess_ms;
};
AcrossRanks across_ranks(const std::vector<double>& mine, DistGroup& group) {
  const int world = group.world_size();
  AcrossRanks out;
  out.excess_ms.assign(static_cast<size_t>(world), 0.0);
  const int64_t steps = group.all_reduce_max({static_cast<int64_t>(mine.size())})[0];
  if (steps == 0) return out;
  std::vector<int64_t> ns(static_cast<size_t>(steps), std::numeric_limits<int64_t>::max());
  for (size_t i = 0; i < mine.size(); ++i) ns[i] = static_cast<int64_t>(std::llround(mine[i] * 1e6));
  const std::vector<int64_t> every = group.all_gather(ns);
  int64_t counted = 0;
  for (size_t i = 0; i < static_cast<size_t>(steps); ++i) {
    int64_t least = std::numeric_limits<int64_t>::max();
    for (int r = 0; r < world; ++r) least = std::min(least, every[static_cast<size_t>(r) * ns.size() + i]);
    if (least == std::numeric_limits<int64_t>::max()) continue;
    out.least_ms += static_cast<double>(least) / 1e6;
    ++counted;
    for (int r = 0; r < world; ++r) {
      const int64_t own = every[static_cast<size_t>(r) * ns.size() + i];
      if (own != std::numeric_limits<int64_t>::max()) out.excess_ms[static_cast<size_t>(r)] += static_cast<double>(own - least) / 1e6;
    }
  }
  if (counted == 0) return out;
  out.least_ms /= static_cast<double>(counted);
  for (double& e : out.excess_ms) e /= static_cast<double>(counted);
  return out;
}
}  // namespace

void TrainRanks::finish_training(RankTraining mine_row, double step_ms) {
  if (!ddp_ || !group_) return;
  // the gradients' all-reduce as the last rank to arrive saw it, and each rank's wait: in that
  // all-reduce and at the step's agreement point (where a faster rank waits for a slower one)
  const AcrossRanks allreduce = across_ranks(ddp_->stats().step_allreduce_ms, *group_);
  const AcrossRanks agreed = across_ranks(sync_ ? sync_->agree_ms() : std::vector<double>{}, *group_);
  last_rank_allreduce_ms_ = allreduce.least_ms;
  step_ms_ = step_ms;
  // the ranks' table: budget, micro-batch, accumulation, share and step time of each
  constexpr size_t kFields = 7;
  const std::vector<int64_t> rows = group_->all_gather(
      {mine_row.budget_bytes, mine_row.micro_batch, mine_row.accumulation, mine_row.share,
       static_cast<int64_t>(std::llround(step_ms * 1e6)), mine_row.max_batch, mine_row.max_batch_exact ? 1 : 0});
  rank_rows_.clear();
  for (int r = 0; r < world_size(); ++r) {
    const size_t at = static_cast<size_t>(r) * kFields;
    RankTraining row{r, rows[at], rows[at + 1], rows[at + 2], rows[at + 3]};
    row.max_batch = rows[at + 5];
    row.max_batch_exact = rows[at + 6] != 0;
    row.wait_ms = allreduce.excess_ms[static_cast<size_t>(r)] + agreed.excess_ms[static_cast<size_t>(r)];
    const double busy_s = (static_cast<double>(rows[at + 4]) / 1e6 - row.wait_ms) / 1e3;
    row.samples_per_s = busy_s > 0 ? static_cast<double>(row.share) / busy_s : 0.0;
    if (static_cast<size_t>(r) < measured_samples_per_s_.size())
      row.measured_samples_per_s = measured_samples_per_s_[static_cast<size_t>(r)];
    rank_rows_.push_back(row);
  }
}

namespace {
/// This window's per-step times from a rank's record of every step (`all`, from index `from`):
/// one per step when it holds one per step, else its sum spread evenly (an OOM redo adds entries).
std::vector<double> per_step(const std::vector<double>& all, size_t from, size_t steps) {
  std::vector<double> out(all.begin() + static_cast<std::ptrdiff_t>(std::min(from, all.size())), all.end());
  if (out.size() == steps) return out;
  double sum = 0;
  for (double v : out) sum += v;
  return std::vector<double>(steps, steps > 0 ? sum / static_cast<double>(steps) : 0.0);
}
}  // namespace

std::optional<std::vector<int64_t>> TrainRanks::rebalance_shares(int64_t step, double step_ms) {
  const int64_t every = options_.resplits();
  if (every <= 0 || !ddp_ || !sync_ || !group_ || shares_.empty()) return std::nullopt;
  const auto window_begins = [&] {
    window_step_ms_.clear();
    window_agree_from_ = sync_->agree_ms().size();
    window_allreduce_from_ = ddp_->stats().step_allreduce_ms.size();
  };
  if (!window_open_) {  // this step warmed up (the run's first, or the first after a change)
    window_begins();
    window_open_ = true;
    return std::nullopt;
  }
  window_step_ms_.push_back(step_ms);
  const size_t n = window_step_ms_.size();
  if (static_cast<int64_t>(n) < every) return std::nullopt;
  // each rank's steps of the window: wall time, time at the agreement point, time in the
  // all-reduce; at each step a rank's wait is its time there beyond the least any rank spent (the
  // last to arrive's), its busy time the rest of its step; a rank's busy time is the median of its
  // steps' (a step preempted by other load moves it less than a mean)
  std::vector<int64_t> mine;
  for (const std::vector<double>& v : {window_step_ms_, per_step(sync_->agree_ms(), window_agree_from_, n),
                                       per_step(ddp_->stats().step_allreduce_ms, window_allreduce_from_, n)})
    for (double ms : v) mine.push_back(std::llround(ms * 1e6));
  const std::vector<int64_t> all = group_->all_gather(mine);
  const int world = world_size();
  const auto at = [&](int r, size_t part, size_t i) {
    return static_cast<double>(all[static_cast<size_t>(r) * 3 * n + part * n + i]) / 1e6;
  };
  std::vector<std::vector<double>> busy_steps(static_cast<size_t>(world));
  for (size_t i = 0; i < n; ++i) {
    double least_agree = std::numeric_limits<double>::max(), least_allreduce = least_agree;
    for (int r = 0; r < world; ++r) {
      least_agree = std::min(least_agree, at(r, 1, i));
      least_allreduce = std::min(least_allreduce, at(r, 2, i));
    }
    for (int r = 0; r < world; ++r)
      busy_steps[static_cast<size_t>(r)].push_back(at(r, 0, i) - (at(r, 1, i) - least_agree) -
                                                   (at(r, 2, i) - least_allreduce));
  }
  std::vector<double> busy_ms;
  for (const std::vector<double>& b : busy_steps) busy_ms.push_back(median(b));
  ++share_looks_;
  ShareBalance b = balance_shares(shares_, busy_ms, options_.share_balance.min_gain);
  b.step = step + 1;
  if (!b.resplit) {
    window_begins();
    return std::nullopt;
  }
  shares_ = b.proposed;
  const int64_t global = std::accumulate(shares_.begin(), shares_.end(), int64_t{0});
  ddp_->set_gradient_weight(static_cast<double>(shares_[static_cast<size_t>(rank())]) / static_cast<double>(global));
  share_changes_.push_back(std::move(b));
  window_open_ = false;  // the next step restarts the loader: not counted
  return shares_;
}

TrainRanksSummary TrainRanks::summary() const {
  TrainRanksSummary r;
  r.world_size = world_size();
  r.rank = rank();
  r.parallel = dp_devices_.empty() ? (ddp_ ? "ddp" : "none") : "dp";
  r.data_parallel_devices = static_cast<int64_t>(dp_devices_.size());
  if (!ddp_) return r;
  const DdpStats s = ddp_->stats();
  r.backend = to_string(group_->backend());
  r.allreduce_ms = s.synced_steps > 0 ? s.allreduce_ms / static_cast<double>(s.synced_steps) : 0.0;
  r.allreduce_overlap_fraction = s.overlap_fraction();
  r.gradient_buckets = s.buckets;
  r.gradient_bytes = s.gradient_bytes;
  r.network = network_;
  if (network_) {  // every bucket but the last is sent while the backward computes, for backward_beside_ms
    r.backward_beside_buckets_ms = s.synced_steps > 0 ? s.backward_beside_ms / static_cast<double>(s.synced_steps) : 0.0;
    r.predicted_allreduce_ms = network_->predicted_ms(s.gradient_bytes, s.buckets, s.gradient_bytes - s.last_bucket_bytes,
                                                      r.backward_beside_buckets_ms);
  }
  r.last_rank_allreduce_ms = last_rank_allreduce_ms_;
  r.compress_bf16 = compress_bf16_;
  r.compression_by = compression_by_;
  r.compression_speedup = compression_speedup_;
  r.min_compression_speedup = options_.min_compression_speedup;
  r.bucket_tuning = bucket_tuning_;
  r.ranks = rank_rows_;
  r.step_ms = step_ms_;
  r.shares_by = options_.shares.by_speed ? "speed" : shares_.empty() ? "equal" : "given";
  if (options_.resplits() > 0) {
    r.share_balance = options_.share_balance;
    r.share_balance.every_steps = options_.resplits();
    r.share_looks = share_looks_;
    r.share_changes = share_changes_;
  }
  return r;
}


}  // namespace saturate

// Implements: the data-parallel side of one training process (docs/distributed.md): nothing for
// one process; under a launcher (saturate launch, torchrun, mpirun, SLURM) the process group,
// each rank's shard of the data, DDP with its gradient buckets and rank-0 checkpoints; or, in
// one process over the visible GPUs, DataParallel replicas. Options checked once, naming them.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/data/loader.h"
#include "saturate/dist/data_parallel.h"
#include "saturate/dist/ddp.h"
#include "saturate/dist/ddp_sync.h"
#include "saturate/dist/ranks_summary.h"
#include "saturate/data/batch_plan.h"
#include "saturate/train/share_balance.h"
#include "saturate/dist/process_group.h"
#include "saturate/probe/findings.h"
#include "saturate/step/workload.h"
#include "saturate/train/trainer.h"

namespace saturate {

struct TrainRanksOptions {
  /// backend: the process group's (auto: nccl on CUDA, gloo on CPU).
  DistBackend backend = DistBackend::kAuto;
  /// timeout_s > 0: how long a rendezvous or collective waits for the other ranks.
  double timeout_s = 300;
  /// bucket_mb > 0: DDP's gradient bucket size in MiB; 0 (not given): PyTorch's 25 with a 1 MiB
  /// first bucket, and under measure_compression the buckets are tuned by measurement
  /// (dist/bucket_tuning.h: the default kept unless another is min_bucket_speedup faster).
  double bucket_mb = 0;
  double min_bucket_speedup = 1.1;
  /// parallel: "ddp" (several ranks, DistributedDataParallel) or "dp" (DataParallel in one
  /// process over the visible GPUs).
  std::string parallel = "ddp";
  /// measure_compression (`fast_paths` auto or try): on several DDP ranks, time the gradients'
  /// all-reduce in float32 and in bf16 at the start and keep compress_bf16 when the bf16 one is
  /// at least min_compression_speedup times faster (the conversions counted). compress_bf16 named
  /// in the step's fast paths compresses without measuring.
  bool measure_compression = false;
  double min_compression_speedup = 1.2;
  /// shares: each rank's samples of every global batch, one per rank (ranks of unequal speed or
  /// memory), or by_speed (auto: measured before training, set_shares); none: equal shares. The
  /// sampler gives each rank its part of every global batch and DDP weights each rank's
  /// gradient by its share (exact: the one-process step).
  SharesOption shares;
  /// How often the ranks' busy times are looked at during training, and the gain that re-splits
  /// the shares (train/share_balance.h): by default with `shares` auto; from given shares when
  /// every_steps is given.
  ShareBalanceOptions share_balance;
  /// Steps between looks at the ranks' busy times while training (0: the shares are kept).
  int64_t resplits() const { return shares.given() ? share_balance.looks_every(shares.by_speed) : 0; }
  /// UsageError naming the option.
  void check() const;
};

class TrainRanks {
 public:
  /// One process, no parallelism.
  TrainRanks() = default;
  /// Checks the options against the rendezvous `env` and the device asked for ("auto", "cpu",
  /// "cuda", "cuda:N"): dp needs CUDA devices and one process. Call before the model is built.
  TrainRanks(const TrainRanksOptions& options, DistEnv env, const std::string& device);
  TrainRanks(TrainRanks&&) = default;
  TrainRanks& operator=(TrainRanks&&) = default;

  /// Several ranks: joins the process group (a collective). Once the device is known.
  void connect(const c10::Device& device);
  /// After the model is on its device, before training: several ranks shard `loader` (rank r
  /// reads positions r, r + world, ... of the same per-epoch permutation, padded), wrap the
  /// model in DDP (a collective) and only rank 0 writes checkpoints; dp replicates the model over
  /// the GPUs. Sets `train`'s sync. compress_bf16 in `train.fast_paths` without DDP ranks is a
  /// UsageError (it changes only the all-reduce between ranks).
  void setup(Workload& workload, LoaderOptions& loader, TrainOptions& train);

  /// Several ranks: the gradients' all-reduce a step will take, predicted from the network
  /// measured now (once: setup reuses it, and decides compression there from the same numbers),
  /// the ranks' mean (a collective: every rank calls it); 0 for one process.
  double step_allreduce_ms(Workload& workload, bool compression_named);
  /// The network as measured (network_summary), "" before it is or with one process.
  std::string network_text() const { return network_ ? network_summary(*network_) : ""; }

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  /// Each rank's samples of every global batch (TrainRanksOptions::shares, or as set_shares
  /// chose them; empty: equal).
  const std::vector<int64_t>& shares() const { return shares_; }
  /// Before setup: the shares chosen for `shares` auto (by speed: `by` says how, for the summary).
  void set_shares(std::vector<int64_t> shares, std::vector<double> measured_samples_per_s);
  bool shares_by_speed() const { return options_.shares.by_speed; }
  const ShareBalanceOptions& share_balance() const { return options_.share_balance; }
  /// Steps between looks at the ranks while training; 0: the shares are kept (TrainRanksOptions).
  int64_t resplits() const { return options_.resplits(); }
  /// Unequal shares re-split while training (resplits() > 0), after step `step` (0-based) of `step_ms` wall time, on every
  /// rank: every resplits() steps (the first step and the one after a change not
  /// counted) each rank's steps are gathered (a collective) and its busy time per step taken: the
  /// median over the window of its step less its waits for the others (at the agreement point and
  /// in the all-reduce); the shares are re-split when balance_shares says so; then DDP weights each rank's gradient by its new share and the new
  /// shares are returned (the caller re-splits the data). nullopt: unchanged.
  std::optional<std::vector<int64_t>> rebalance_shares(int64_t step, double step_ms);
  /// The re-splits rebalance_shares made, in order.
  const std::vector<ShareBalance>& share_changes() const { return share_changes_; }
  /// Rank 0 (or the only process) reports, writes the summary, the model and checkpoints.
  bool writer() const { return env_.rank == 0; }
  /// The devices DataParallel replicates over (empty: none).
  const std::vector<c10::Device>& data_parallel_devices() const { return dp_devices_; }
  DistGroup* group() const { return group_.get(); }

  /// After training, on every rank (a collective with DDP): each step's all-reduce gathered, for
  /// the summary's last_rank_allreduce_ms and each rank's wait; `mine` (this rank's budget,
  /// micro-batch, accumulation and share) and its mean step time gathered for the ranks' table.
  void finish_training(RankTraining mine, double step_ms);

  /// How the ranks trained (the train JSON's world_size, parallel, backend, all-reduce keys).
  TrainRanksSummary summary() const;

 private:
  void measure_network_once(Workload& workload, bool compression_named);
  /// DDP's bucket size in bytes: bucket_mb's, or PyTorch's 25 MiB when not given.
  int64_t bucket_bytes() const;
  /// Tunes `ddp`'s bucket sizes at the training step's micro-batch (forward and synced backward
  /// passes; the weights, buffers and generators restored after).
  void tune_buckets_for(Workload& workload, const TrainOptions& train, DdpOptions& ddp);

  TrainRanksOptions options_;
  DistEnv env_;
  std::unique_ptr<DistGroup> group_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<DdpStepSync> sync_;
  std::vector<c10::Device> dp_devices_;
  std::unique_ptr<DataParallelSync> dp_sync_;
  std::optional<NetworkMeasure> network_;
  bool compress_bf16_ = false;
  std::string compression_by_;
  double compression_speedup_ = 0;
  std::optional<BucketTuning> bucket_tuning_;
  double last_rank_allreduce_ms_ = 0;
  std::vector<RankTraining> rank_rows_;
  std::vector<int64_t> shares_;
  double step_ms_ = 0;
  std::vector<double> measured_samples_per_s_;  // shares auto: each rank's speed they were chosen by
  // rebalance_shares' window: its steps' wall times; where the agreement points' and the
  // all-reduces' per-step times stood when it began
  bool window_open_ = false;  // false: the next step warms up (not counted)
  std::vector<double> window_step_ms_;
  size_t window_agree_from_ = 0, window_allreduce_from_ = 0;
  int64_t share_looks_ = 0;
  std::vector<ShareBalance> share_changes_;
};

}  // namespace saturate

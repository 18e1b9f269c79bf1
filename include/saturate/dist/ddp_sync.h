// Implements: the Trainer's data-parallel hooks (train/trainer.h StepSync) with DDP: rank 0's
// model is broadcast when the run begins (after a resume too), only the last micro-batch of a
// step all-reduces (no_sync before it), and its backward returns with averaged gradients.
// Each rank's TrainData must give its own share of every global batch (LoaderOptions.shard).
// Once per step attempt, before the backward that all-reduces, one more all-reduce (two doubles:
// an OOM flag and the step loss) makes an OOM on any rank an OOM for all, so every rank backs
// off together, and gives every rank the loss of the whole global batch.
#pragma once
#include <chrono>
#include <cmath>
#include <vector>

#include "saturate/dist/ddp.h"
#include "saturate/train/trainer.h"

namespace saturate {

class DdpStepSync final : public StepSync {
 public:
  explicit DdpStepSync(DistributedDataParallel& ddp) : ddp_(ddp) {}
  void begin_run() override { ddp_.broadcast_from_rank0(); }
  void before_forward(bool last) override {
    if (last) ddp_.prepare_for_forward();
  }
  void backward(const torch::Tensor& loss, bool last) override { ddp_.backward(loss, last); }
  int world_size() const override { return ddp_.world_size(); }
  int64_t global_samples(int64_t rank_samples) const override {
    if (!ddp_.weighted()) return rank_samples * ddp_.world_size();
    return std::llround(static_cast<double>(rank_samples) / ddp_.gradient_weight());
  }
  /// The loss of the whole global batch: the ranks' mean, each rank's weighted by its share
  /// where the shares are unequal; by its real tokens where the batches are padded documents
  /// (each rank's loss and gradient a mean over its own tokens), and the step's gradients then
  /// weighted alike (DistributedDataParallel::set_step_weight).
  bool agree(bool oom, double& loss, double tokens, bool padded) override {
    const double weighted = ddp_.weighted() ? loss * ddp_.gradient_weight() : loss;
    const bool counted = !oom && tokens > 0;
    const auto started = std::chrono::steady_clock::now();
    const std::vector<double> sums = ddp_.group().all_reduce_sum(
        {oom ? 1.0 : 0.0, oom ? 0.0 : weighted, counted ? loss * tokens : 0.0, counted ? tokens : 0.0,
         counted ? 0.0 : 1.0, counted && padded ? 1.0 : 0.0});
    agree_ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    if (sums[4] == 0 && sums[3] > 0 && sums[5] > 0) {  // padded documents on some rank: the token mean
      loss = sums[2] / sums[3];
      ddp_.set_step_weight(tokens / sums[3]);
    } else {
      loss = ddp_.weighted() ? sums[1] : sums[1] / static_cast<double>(ddp_.world_size());
      ddp_.set_step_weight(0);
    }
    return sums[0] > 0;
  }
  std::vector<double> mean(std::vector<double> values) override {
    std::vector<double> sums = ddp_.group().all_reduce_sum(values);
    for (double& v : sums) v /= static_cast<double>(ddp_.world_size());
    return sums;
  }
  /// Each agree()'s wall time, in order: a rank that reaches it first waits there for the others
  /// (the per-step point where a faster rank waits for a slower one).
  const std::vector<double>& agree_ms() const { return agree_ms_; }
  /// The all-reduce time not overlapped with the backward's computation, since the last call.
  double exposed_allreduce_ms() override {
    const DdpStats s = ddp_.stats();
    const double exposed = s.allreduce_ms - s.overlapped_ms;
    const double since_last = exposed - exposed_seen_ms_;
    exposed_seen_ms_ = exposed;
    return since_last;
  }

 private:
  DistributedDataParallel& ddp_;
  double exposed_seen_ms_ = 0;
  std::vector<double> agree_ms_;
};

}  // namespace saturate

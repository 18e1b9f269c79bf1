// Implements: the Trainer's data-parallel hooks (train/trainer.h StepSync) with DDP: rank 0's
// model is broadcast when the run begins (after a resume too), only the last micro-batch of a
// step all-reduces (no_sync before it), and its backward returns with averaged gradients.
// Each rank's TrainData must give its own share of every global batch (LoaderOptions.shard).
// The Trainer's OOM back-off is per process: turn it off for data-parallel runs, or every rank
// must back off together.
#pragma once
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
};

}  // namespace saturate

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

 private:
  DistributedDataParallel& ddp_;
};

}  // namespace saturate

// Implements: DistributedDataParallel for a torch::nn::Module, on c10d's own Reducer.
//  - parameters and buffers are broadcast from rank 0 at the start (model states then agree);
//  - gradients are bucketed (default 25 MiB, a 1 MiB first bucket, like PyTorch) and each bucket
//    is all-reduced from the autograd hooks as soon as it fills, so communication overlaps the
//    rest of the backward pass; gradients are averaged over the world size and ready when
//    backward() returns (the Reducer waits in its end-of-backward callback);
//  - with accumulation, only the micro-batch whose backward follows prepare_for_backward()
//    communicates; the others accumulate locally (PyTorch's no_sync), and the all-reduce of
//    the last one carries the accumulated sum.
// The Reducer is c10d-internal (its constructor changed in 2.x): this is the one file using it.
// Communication is timed by our comm hook: allreduce_ms (wall time some bucket was in flight)
// and the fraction of it that overlapped the backward computation.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "saturate/dist/process_group.h"

namespace saturate {

struct DdpOptions {
  /// Bucket capacity; PyTorch's default is 25 MiB.
  int64_t bucket_bytes = int64_t{25} << 20;
  /// The first bucket (the last layers' gradients) is small so communication starts early.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  /// All-reduce float32 gradients in bf16 (half the bytes; the gradients stay float32 around it).
  bool compress_bf16 = false;
  /// This rank's share of every global batch (its samples / the global batch's); 0: 1 / world
  /// size (equal shares). Each rank's mean gradient is weighted by it before the sum-all-reduce,
  /// so unequal shares give the gradient of the whole batch's mean loss.
  double gradient_weight = 0;
};

struct DdpStats {
  int64_t synced_steps = 0;    ///< backward passes that communicated
  int64_t buckets = 0;         ///< buckets per synced backward
  int64_t gradient_bytes = 0;  ///< bytes all-reduced per synced backward (as sent: bf16 when compressed)
  int64_t last_bucket_bytes = 0;  ///< of which the last bucket launched (after the backward's end)
  double allreduce_ms = 0;     ///< wall time with a bucket in flight, summed over synced steps
  double overlapped_ms = 0;    ///< of which while backward was still computing gradients
  /// From the first bucket's launch to the last's, summed over synced steps: how long the
  /// backward still computed beside buckets in flight (0 with one bucket).
  double backward_beside_ms = 0;
  /// Each synced backward's wall time with a bucket in flight, in order (allreduce_ms's parts).
  std::vector<double> step_allreduce_ms;
  double overlap_fraction() const { return allreduce_ms > 0 ? overlapped_ms / allreduce_ms : 0; }
};

/// The buckets DDP would build over `parameters` (those that require grad) with `options`' sizes:
/// each bucket's parameter indices, in the order they are all-reduced.
std::vector<std::vector<size_t>> ddp_bucket_assignment(const std::vector<torch::Tensor>& parameters,
                                                       const DdpOptions& options);

class DistributedDataParallel {
 public:
  /// A collective: every rank constructs it with the same model. Checks that the models agree
  /// in shapes (c10d's verify_params_across_processes) and builds the buckets.
  DistributedDataParallel(torch::nn::Module& module, DistGroup& group, DdpOptions options = {});
  /// The same for any model: `parameters` get averaged gradients (those that require grad),
  /// `states` (parameters and buffers) are what the broadcast from rank 0 copies.
  DistributedDataParallel(std::vector<torch::Tensor> parameters, std::vector<torch::Tensor> states,
                          DistGroup& group, DdpOptions options = {});
  ~DistributedDataParallel();

  /// Copies rank 0's parameters and buffers to every rank (a collective).
  void broadcast_from_rank0();
  /// Before the forward of a micro-batch whose backward must all-reduce (the last of a step).
  void prepare_for_forward();
  /// Before that micro-batch's backward: its backward all-reduces the (accumulated) gradients.
  /// Without this call a backward only accumulates locally (no_sync).
  void prepare_for_backward(const torch::Tensor& loss);

  /// prepare_for_backward(loss) when `sync`, then loss.backward(); a failed all-reduce (a rank
  /// died or timed out) becomes a RuntimeFailure naming the ranks that are gone.
  void backward(const torch::Tensor& loss, bool sync);
  /// Wraps any error of a DDP step (e.g. from a caller's own backward()) the same way.
  RuntimeFailure failure(const std::exception& e) const;

  int world_size() const;
  /// This rank's weight in the average (DdpOptions::gradient_weight, or 1 / world size).
  double gradient_weight() const;
  /// True where DdpOptions::gradient_weight was given (unequal shares).
  bool weighted() const;
  /// The weight of this rank's gradient in the next synced backward's sum (its real tokens' part
  /// of the step's, for padded documents); 0: gradient_weight() again.
  void set_step_weight(double weight);
  /// Unequal shares re-split during training: this rank's weight (its new share / the global
  /// batch) from the next synced backward on. Only where the weight was given (weighted()).
  void set_gradient_weight(double weight);
  DistGroup& group();
  /// Timing so far (completes the last synced step's accounting).
  DdpStats stats();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace saturate

// Implements: how the ranks of a data-parallel run trained, as the run's summary reports it
// (docs/distributed.md): their number, the parallelism, the backend, the gradients' all-reduce
// (time per step, overlap, buckets, the network measured and the time it predicts, compression),
// each rank's share, speed and wait, the straggler and the shares' re-splits. Filled by
// session/train_ranks.h; printed by report/ (train_text.h) and its JSON (add_to_json).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/dist/bucket_tuning.h"
#include "saturate/dist/network_measure.h"
#include "saturate/probe/findings.h"
#include "saturate/train/share_balance.h"

namespace saturate {

/// One rank of a DDP run, as it trained (the JSON's `ranks`, issue 28).
struct RankTraining {
  int rank = 0;
  int64_t budget_bytes = 0;  ///< its memory budget (0: the device's)
  int64_t micro_batch = 0;
  int64_t accumulation = 0;
  int64_t share = 0;         ///< its samples of every global batch
  /// Its samples per second had it never waited for a peer: share / (step time - wait).
  double samples_per_s = 0;
  /// Per step, its time waiting for a slower peer: at the step's agreement point and in the
  /// gradients' all-reduce, beyond the last rank to arrive's (the straggler's is about 0).
  double wait_ms = 0;
  /// `shares` auto: its step's samples/s timed alone at its micro-batch before training, what its
  /// share was chosen by (0 otherwise).
  double measured_samples_per_s = 0;
  /// `batch` auto with unequal shares: its own largest micro-batch, searched at its budget, and
  /// whether max_batch + 1 was seen not to fit there (0: the micro-batch was given, or every rank
  /// uses the smallest rank's).
  int64_t max_batch = 0;
  bool max_batch_exact = false;
};

/// How the ranks trained: their number, the parallelism, the backend and the gradient
/// all-reduce (its time per step, the share overlapped with backward, the buckets).
struct TrainRanksSummary {
  int world_size = 1;
  int rank = 0;  ///< the rank this summary was made on
  std::string parallel = "none";  ///< none | ddp | dp
  int64_t data_parallel_devices = 0;
  std::string backend = "none";
  double allreduce_ms = 0;  ///< per synced step
  std::optional<double> allreduce_overlap_fraction;
  int64_t gradient_buckets = 0;
  int64_t gradient_bytes = 0;
  /// The network measured at the start (DDP on several ranks), and the all-reduce per synced
  /// step it predicts for these buckets (issue 45).
  std::optional<NetworkMeasure> network;
  double predicted_allreduce_ms = 0;
  /// The backward's computation beside buckets in flight a synced step (the first bucket's
  /// launch to the last's), which the prediction counts at the slowdown beside computation.
  double backward_beside_buckets_ms = 0;
  /// The all-reduce per synced step as the last rank to reach it saw it: at each step the least
  /// in-flight time of any rank (a rank that arrived early waits for the others inside its
  /// all-reduce; the last one does not), then their mean. What the wire takes, which the
  /// prediction is about; allreduce_ms (this rank's) includes the wait. 0 when not gathered.
  double last_rank_allreduce_ms = 0;
  /// Whether the gradients were all-reduced in bf16, and why: "named" (compress_bf16 given),
  /// "measured" (auto/try, kept or not by network->compression_speedup()), "" (not considered).
  bool compress_bf16 = false;
  std::string compression_by;
  double min_compression_speedup = 0;
  double compression_speedup = 0;  ///< float32 / bf16 all-reduce time, the ranks' mean (measured)
  /// The gradient buckets as tuned at the start (`fast_paths` auto|try without `bucket_mb`).
  std::optional<BucketTuning> bucket_tuning;
  std::vector<RankTraining> ranks;  ///< each rank (DDP; empty until finish_training)
  std::string shares_by = "equal";  ///< equal | given | speed (`shares` auto)
  /// The looks at the ranks' busy times during training and the re-splits they made (every_steps
  /// set when the shares are re-split).
  ShareBalanceOptions share_balance;
  int64_t share_looks = 0;
  std::vector<ShareBalance> share_changes;
  double step_ms = 0;               ///< a training step's wall time (every rank steps together)
  /// The straggler: the rank the others wait for most, when some rank waits over a tenth of the
  /// step for it (-1: none). The summary then names it and `shares` auto.
  int straggler() const;
  /// The longest any rank waits a step for a slower one.
  double most_wait_ms() const;
  /// world_size, parallel, data_parallel_devices, backend, allreduce_ms,
  /// allreduce_overlap_fraction, gradient_buckets, gradient_bytes, network.
  void add_to_json(nlohmann::json& j) const;
};

/// The monitor's verdict of rank `rank` told of the straggler (issue 28 item 2): a rank that
/// waits for a slower one hears how much of its step the wait is (evidence `straggler`) and, when
/// its verdict is communication-bound, that the wait, not the wire, is the cause, with `shares`
/// auto as the fix; the straggler hears who waits for it. Nothing without a straggler.
void note_straggler(BottleneckFinding& verdict, const TrainRanksSummary& ranks, int rank);

}  // namespace saturate

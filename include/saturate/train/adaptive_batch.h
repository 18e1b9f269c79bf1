// Implements: `train --adaptive` (Pollux's batch-size adaptation, Qiao et al., OSDI '21): the
// global batch is a whole number of units (a unit: the base batch, the one the learning rate was
// tuned for), re-chosen every few steps by goodput = samples/s x statistical efficiency, with the
// gradient noise scale measured during training (it grows as the loss falls, so the batch that
// trains fastest grows too). Samples/s of a global batch M come from the throughput curve timed at
// the start (micro-batch min(M, the largest that trains); beyond it accumulation adds samples, not
// speed). The learning rate follows AdaScale's gain. A change needs `min_gain` more goodput than
// the current batch has (no flapping between two close batches). Pure decisions on numbers: the
// Trainer feeds it, checkpoints its state, and every rank decides on the same (averaged) numbers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "saturate/search/goodput.h"
#include "saturate/search/throughput_curve.h"

namespace saturate {

/// One rank of a job whose ranks take unequal shares of every global batch (issue 28).
struct AdaptiveRank {
  int64_t unit = 0;             ///< its samples per unit (its share of the base batch)
  int64_t max_micro_batch = 0;  ///< the largest micro-batch that trains on it
  ThroughputCurve curve;        ///< its own samples/s by micro-batch
};

struct AdaptiveBatchOptions {
  int64_t unit = 0;           ///< samples per unit on this rank (the base batch's share); required
  int world_size = 1;
  int64_t max_units = 64;     ///< the global batch grows to at most this many units
  int64_t max_micro_batch = 0;  ///< the largest micro-batch that trains; required
  int64_t every = 50;         ///< re-decide every this many optimizer steps
  double min_gain = 1.05;     ///< a new batch must promise this much more goodput
  LrRule lr_rule = LrRule::kAdaScale;  ///< kAdaScaleSqrt for Adam and AdamW
  /// samples/s per rank by micro-batch (ok points only are used); required
  ThroughputCurve curve;
  /// step_comm_ms >= 0: what every optimizer step adds whatever its batch: on several ranks the
  /// gradients' all-reduce, predicted from the network measured at the start. A step of R
  /// samples a rank then takes R / samples_per_s + step_comm_ms, so a slow network favours a
  /// larger batch per all-reduce (0: the curve alone, as on one process).
  double step_comm_ms = 0;
  /// Unequal shares: every rank's unit, largest micro-batch and curve, this rank's at `rank`
  /// (unit and max_micro_batch above must be that entry's). A step of `u` units then takes the
  /// slowest rank's time, u x unit_r / samples_per_s_r at its micro-batch, and every rank decides
  /// on all of them alike. Empty: equal shares, `curve` already the job's (the slowest rank's).
  std::vector<AdaptiveRank> ranks;
  int rank = 0;
};

struct AdaptiveChange {
  int64_t step = 0;      ///< the first optimizer step with the new batch
  int64_t old_units = 0;
  int64_t new_units = 0;
  double noise_scale = 0;
  double goodput_gain = 1;  ///< new goodput / old goodput, as predicted
};

class AdaptiveBatch {
 public:
  /// UsageError for a unit, max_units, every or max_micro_batch below 1, min_gain below 1, or a
  /// curve without an ok point.
  explicit AdaptiveBatch(AdaptiveBatchOptions options);

  int64_t units() const { return units_; }
  /// Samples per optimizer step on this rank and over all ranks.
  int64_t rank_batch() const { return units_ * opt_.unit; }
  int64_t global_batch() const { return units_ * base_batch(); }
  /// One unit over all ranks: the base batch.
  int64_t base_batch() const;
  /// The micro-batch for the current batch: the whole rank batch when it trains, else the largest
  /// micro-batch that does (the last micro-batch of a step may be shorter).
  int64_t micro_batch() const;
  /// The learning-rate rule's gain at the current batch against one unit, with the noise scale of
  /// the last decision.
  double lr_gain() const { return lr_gain_; }
  const std::vector<AdaptiveChange>& changes() const { return changes_; }
  double step_comm_ms() const { return opt_.step_comm_ms; }

  /// samples/s per rank at `units` (from the curve, with step_comm_ms every step), x efficiency
  /// against one unit.
  double goodput(int64_t units, std::optional<double> noise_scale) const;
  /// Whether after_step(step) decides (every rank must then bring the same noise scale).
  bool due(int64_t step) const { return (step + 1) % opt_.every == 0; }
  /// At the end of optimizer step `step` (0-based): re-decides when due(step); nothing without a
  /// noise scale. Returns true when the batch changed (from step + 1 on).
  bool after_step(int64_t step, std::optional<double> noise_scale);
  /// An OOM back-off lowered the micro-batch that trains. With unequal shares every rank backs
  /// off with it, each halving its own micro-batch: their maxima are lowered alike.
  void lower_max_micro_batch(int64_t micro_batch);

  /// {units, lr_gain, max_micro_batch, base batch (all ranks), then 5 numbers per change};
  /// load_state takes what state() gave, and refuses (UsageError "base_batch") another base batch.
  /// With unequal shares the saved max_micro_batch (rank 0's) is not this rank's: each keeps the
  /// one its own search found.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  /// Samples/s (over all ranks with unequal shares; per rank with equal ones) of a step of
  /// `units`, the all-reduce counted.
  double step_samples_per_s(int64_t units) const;

  AdaptiveBatchOptions opt_;
  int64_t units_ = 1;
  double lr_gain_ = 1;
  std::vector<AdaptiveChange> changes_;
};

}  // namespace saturate

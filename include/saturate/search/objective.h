// Implements: which batch is best (docs/search.md, "Which batch is best"): after the memory
// search, the objective chooses among the batches that fit. memory: the largest under the target;
// throughput: the knee of the measured samples/s curve; goodput: samples/s x statistical
// efficiency from the gradient noise scale (Pollux, seeds B1, B3, B9). Options in (checked once,
// naming the option), a typed outcome out, progress through callbacks: the command line, the
// Python binding and `train` call the same code. Reads only Trials and a noise measurement, so it
// is tested against fakes.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/probe/trial.h"
#include "saturate/search/goodput.h"
#include "saturate/search/throughput_curve.h"
#include "saturate/step/gradient_noise.h"

namespace saturate {

/// The batch a learning rate is taken to be tuned for when none is given: one default for the
/// search's goodput and for training's goodput, --adaptive and learning-rate scaling (issue 44:
/// search said 32, train 64).
inline constexpr int64_t kDefaultBaseBatch = 32;

struct ObjectiveOptions {
  Objective objective = Objective::kMemory;  ///< objective
  /// knee_fraction, (0, 1]: throughput's knee is the smallest batch within this fraction of the
  /// best samples/s.
  double knee_fraction = 0.9;
  /// noise_steps, 1..10000: goodput's steps that measure the gradient noise scale.
  int noise_steps = 40;
  /// base_batch, >= 0: the batch the learning rate was tuned for (0: kDefaultBaseBatch, or the
  /// largest batch when smaller); goodput's efficiency and learning-rate gain are relative to it.
  int64_t base_batch = 0;
  /// lr_rule: AdaScale's gain (SGD) or its square root (Adam, AdamW).
  LrRule lr_rule = LrRule::kAdaScale;
  /// UsageError naming the option (knee_fraction, noise_steps, base_batch) when one is out of range.
  void check() const;
};

/// Measures the noise scale with `steps` steps of `batch` samples each, at the model's current
/// weights, which it leaves as they were. What runs the steps is the caller's: the built-in
/// step (measure_noise_scale) or a user's step that hands its gradients over.
using NoiseMeasure = std::function<NoiseScaleMeasurement(int64_t batch, int steps)>;

struct ObjectiveProgress {
  std::function<void(Objective, int64_t max_batch)> on_curve_start;  ///< before the curve is timed
  std::function<void(const ThroughputPoint&)> on_point;              ///< each point of the curve
  std::function<void(int64_t batch, int steps)> on_noise_start;      ///< before the noise scale
};

/// Several data-parallel ranks: how each rank's curve becomes the job's (seed M8, issue 45: a slow
/// network makes a larger batch per all-reduce faster). Default: one process.
struct ObjectiveRanks {
  int world_size = 1;
  /// The gradients' all-reduce a step, predicted from the network measured between the ranks
  /// (the same number on every rank).
  double allreduce_ms = 0;
  /// Every rank's curve into one (the slowest rank's; a collective, every rank calls it).
  std::function<ThroughputCurve(const ThroughputCurve&)> combine;
  /// The network, for the reason ("bus bandwidth 11.4 MB/s, latency 0.31 ms").
  std::string network;
  /// The runner ran every rank's step together (RankSyncedRunner) and the steps communicate
  /// themselves (a user's DDP or FSDP step): its times already hold the all-reduce (allreduce_ms
  /// is then 0), the slowest rank's.
  bool step_collectives = false;
};

struct ObjectiveOutcome {
  /// The objective that chose `batch`: the requested one, or the one it fell back to (goodput
  /// falls back to throughput when the noise scale cannot be measured).
  Objective objective = Objective::kMemory;
  Objective requested = Objective::kMemory;  ///< what was asked for
  /// Why the requested objective did not choose, in one line ("" when it did).
  std::string fallback;
  int64_t batch = 0;  ///< the batch the objective chose (memory: the batch it was given)
  std::optional<ThroughputCurve> curve;
  std::optional<NoiseScaleMeasurement> noise;
  std::string noise_data;  ///< where the noise scale's batches came from
  /// Goodput's choice; nullopt when goodput was not asked for or the noise scale was not
  /// measurable (then no goodput pick and no learning-rate change: `fallback` says so).
  std::optional<GoodputChoice> goodput;
  std::string reason;  ///< why this batch, in one line
};

/// The batch goodput measures the noise scale at: the base batch (32 by default) within
/// [2, max_batch].
int64_t noise_batch_for(const ObjectiveOptions& options, int64_t max_batch);

/// Times the curve on `runner` up to `max_batch` and, for goodput, measures the noise scale with
/// `noise` (`noise_data` names its batches). Memory (or max_batch 0): `max_batch` unchanged.
/// Goodput with a noise scale that is not measurable (the gradient is all noise after the
/// steps) picks nothing from it: the knee of the curve chooses (objective throughput, the
/// fallback named), and no learning-rate gain is given. Checks `options` first.
/// With several `ranks` (throughput only), the knee is the job's: the ranks' curves combined and
/// the all-reduce counted in every point (with_allreduce); samples/s are then the job's.
ObjectiveOutcome pick_by_objective(TrialRunner& runner, const ObjectiveOptions& options, int64_t max_batch,
                                   const NoiseMeasure& noise, const std::string& noise_data,
                                   const ObjectiveProgress& progress = {}, const ObjectiveRanks& ranks = {});

/// The curve options the objective times with (one place for the knee and the range).
ThroughputCurveOptions curve_options(const ObjectiveOptions& options, int64_t max_batch);

/// JSON: the search and train JSON's "objective" key (docs/search.md).
nlohmann::json to_json(const ObjectiveOutcome& o);
nlohmann::json to_json(const ThroughputCurve& c);

}  // namespace saturate

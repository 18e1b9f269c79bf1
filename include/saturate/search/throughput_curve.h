// Implements: the measured throughput curve (seed B1, B3): samples/s at log-spaced batches up to
// the largest that fits, each point timed in rounds until the spread of its mean is small, and the
// knee — the smallest batch that reaches a given fraction of the best samples/s. Past the knee a
// larger batch buys memory pressure, not speed. Reads only Trials, so it is tested against fakes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "saturate/probe/trial.h"

namespace saturate {

struct ThroughputPoint {
  int64_t batch = 0;
  bool ok = false;             ///< every round ran (false: an OOM or error; the message is kept)
  double samples_per_s = 0;    ///< mean over the rounds
  double stddev = 0;           ///< of the rounds' samples/s
  double rel_std_error = 0;    ///< stddev / sqrt(rounds) / mean
  int rounds = 0;
  bool settled = false;        ///< rel_std_error <= spread_target
  std::vector<double> round_samples_per_s;
  std::string error;
};

struct ThroughputCurveOptions {
  int64_t max_batch = 0;       ///< the largest batch to time (the search's max); required
  int64_t min_batch = 1;
  int points_per_doubling = 1;  ///< 1: 1, 2, 4, ...; 2: 1, 1.41, 2, 2.83, ... (rounded); max_batch always
  int warmup_steps = 1;         ///< per round
  int measure_steps = 2;        ///< timed steps per round
  int min_rounds = 3;
  int max_rounds = 8;
  /// A point is done when the standard error of its mean samples/s is at most this fraction of
  /// the mean (or after max_rounds; the point then says it did not settle).
  double spread_target = 0.02;
  /// The knee: the smallest batch whose mean samples/s is at least this fraction of the best.
  double knee_fraction = 0.9;
  /// Called after each point (progress); may be empty.
  std::function<void(const ThroughputPoint&)> on_point;
};


struct ThroughputCurve {
  std::vector<ThroughputPoint> points;  ///< ascending batch; timing stops at the first failure
  int64_t knee_batch = 0;               ///< 0 when no point ran
  double best_samples_per_s = 0;
  int64_t best_batch = 0;
  double knee_fraction = 0.9;
  int64_t trial_steps = 0;  ///< training steps run to measure the curve
  double seconds = 0;
};

/// The batches timed: log-spaced from min_batch to max_batch, max_batch included, no repeats.
std::vector<int64_t> curve_batches(int64_t min_batch, int64_t max_batch, int points_per_doubling);

/// Times the curve. UsageError for a max_batch below min_batch or settings out of range.
ThroughputCurve measure_throughput_curve(TrialRunner& runner, const ThroughputCurveOptions& options);

/// The smallest ok point whose mean reaches `fraction` of the best mean (0 when none is ok).
int64_t knee_batch(const std::vector<ThroughputPoint>& points, double fraction);

}  // namespace saturate

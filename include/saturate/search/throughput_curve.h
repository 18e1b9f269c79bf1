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
  /// The mean of the faster half of the rounds (at least 2): load only slows a round down, so
  /// the step's own speed is in its fastest rounds; a slow round is another process's time. On a
  /// CPU device a round's speed counts its steps' time less their wait for a CPU that another
  /// process held (Trial::own_samples_per_s): beside busy processes the step's thread shares a
  /// core for stretches longer than a point's rounds (seen: batch 4958 at half its neighbours'
  /// speed in all three rounds, settled, and knees 512, 1024 and 2048 in three runs)
  double samples_per_s = 0;
  /// The share of the timed steps' time this point waited for a CPU (mean over its rounds; 0 on
  /// a GPU or where the kernel does not say): the part its samples_per_s leaves out.
  double cpu_wait_share = 0;
  double stddev = 0;           ///< of the faster half's samples/s
  double rel_std_error = 0;    ///< stddev / sqrt(rounds kept) / samples_per_s
  int rounds = 0;
  bool settled = false;        ///< rel_std_error <= spread_target
  /// Slower than both neighbours by more than a fifth of the smaller batch's speed: a larger batch
  /// is not that much slower a sample before the plateau, so the measurement is off (beside two
  /// CPU hogs, one point of a curve ran at half speed in every round). For the knee it counts as
  /// its neighbours' geometric mean; its own samples_per_s stay as measured.
  bool dip = false;
  std::vector<double> round_samples_per_s;
  std::string error;
  /// Several ranks (with_allreduce): one rank's samples/s before the gradients' all-reduce (the
  /// slowest rank's step); 0 for one process, whose samples_per_s is the step's alone.
  double compute_samples_per_s = 0;
};

struct ThroughputCurveOptions {
  int64_t max_batch = 0;       ///< the largest batch to time (the search's max); required
  int64_t min_batch = 1;
  int points_per_doubling = 1;  ///< 1: 1, 2, 4, ...; 2: 1, 1.41, 2, 2.83, ... (rounded); max_batch always
  int warmup_steps = 1;         ///< per round
  int measure_steps = 2;        ///< timed steps per round (at least; see min_round_ms)
  /// A round times at least this long (its speed the median step's): a point whose first round
  /// is shorter times ceil(min_round_ms / step ms) steps a round from then on (at most 1000), the
  /// first round a calibration only. 0: measure_steps always.
  double min_round_ms = 50;
  int min_rounds = 3;
  int max_rounds = 8;
  /// A point is done when the standard error of its mean samples/s is at most this fraction of
  /// samples/s (or after max_rounds; the point then says it did not settle).
  double spread_target = 0.02;
  /// The knee: the smallest batch whose samples/s is at least this fraction of the plateau
  /// (plateau_samples_per_s: the median of the points within this fraction of the best).
  double knee_fraction = 0.9;
  /// Called after each point (progress); may be empty.
  std::function<void(const ThroughputPoint&)> on_point;
};


struct ThroughputCurve {
  std::vector<ThroughputPoint> points;  ///< ascending batch; timing stops at the first failure
  ///< (rounds in passes: one round of every point per pass while any is unsettled)
  int64_t knee_batch = 0;               ///< 0 when no point ran
  double best_samples_per_s = 0;
  int64_t best_batch = 0;
  double plateau_samples_per_s = 0;     ///< what the knee reaches a fraction of (plateau_samples_per_s())
  double knee_fraction = 0.9;
  int64_t trial_steps = 0;  ///< training steps run to measure the curve
  double seconds = 0;
  /// Several data-parallel ranks (with_allreduce): the ranks the samples/s count, and the
  /// gradients' all-reduce a step that each point's time includes. 1 and 0: one process.
  int world_size = 1;
  double allreduce_ms_per_step = 0;
};

/// The batches timed: log-spaced from min_batch to max_batch, max_batch included, no repeats.
std::vector<int64_t> curve_batches(int64_t min_batch, int64_t max_batch, int points_per_doubling);

/// Times the curve. UsageError for a max_batch below min_batch or settings out of range.
ThroughputCurve measure_throughput_curve(TrialRunner& runner, const ThroughputCurveOptions& options);

/// A point's samples/s, spread and settledness from its rounds (round_samples_per_s).
void summarize_rounds(ThroughputPoint& point, int min_rounds, double spread_target);

/// The curve's top: the median samples/s of the settled points (all, when none settled) within
/// `fraction` of the best of them. Not the best alone: the largest of many noisy numbers is biased
/// up, and on a flat top it moves from run to run.
double plateau_samples_per_s(const std::vector<ThroughputPoint>& points, double fraction);

/// Sets each point's `dip`.
void mark_dips(std::vector<ThroughputPoint>& points);

/// The curve of a data-parallel job: `curve` is one rank's (the slowest's) steps, and each step
/// of `world_size` ranks also all-reduces the gradients, `allreduce_ms` a step, after the
/// backward (the bound a slow network sets: DDP overlaps what it can with the backward). Each
/// point's samples/s become world_size x batch / (batch / samples_per_s + allreduce_ms), its
/// rounds and spread alike (compute_samples_per_s keeps the step's own); then the best, the
/// plateau, the dips and the knee at `curve.knee_fraction` again. A constant time a step makes a
/// larger batch per all-reduce faster: on a slow link the knee moves up.
ThroughputCurve with_allreduce(ThroughputCurve curve, int world_size, double allreduce_ms);

/// Sets the curve's best, plateau, dips and knee from its points.
void summarize_curve(ThroughputCurve& curve);

/// The smallest ok point whose samples/s reaches `fraction` of the plateau (0 when none is ok),
/// a dip counting as its neighbours' geometric mean.
/// An unsettled point is passed over when the next point settled and reaches it too.
int64_t knee_batch(const std::vector<ThroughputPoint>& points, double fraction);

}  // namespace saturate

#include "saturate/train/adaptive_batch.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/search/goodput.h"

namespace saturate {

namespace {

/// The curve's samples/s at `micro`: the largest timed batch at or below it (a step function:
/// never optimistic); below the smallest timed batch, the smallest one's scaled down.
double curve_samples_per_s(const ThroughputCurve& curve, int64_t micro) {
  double best = 0;
  int64_t at = 0;
  for (const auto& p : curve.points)
    if (p.ok && p.batch <= micro && p.batch >= at) {
      at = p.batch;
      best = p.samples_per_s;
    }
  if (at == 0)
    for (const auto& p : curve.points)
      if (p.ok) return p.samples_per_s * static_cast<double>(micro) / static_cast<double>(p.batch);
  return best;
}

bool has_ok_point(const ThroughputCurve& c) {
  return std::any_of(c.points.begin(), c.points.end(), [](const ThroughputPoint& p) { return p.ok; });
}

}  // namespace

AdaptiveBatch::AdaptiveBatch(AdaptiveBatchOptions options) : opt_(std::move(options)) {
  if (opt_.unit < 1) throw UsageError("base_batch", fmt::format("a unit of {} samples per rank (the base batch's share); give "
                                                                "at least one sample per rank",
                                                                opt_.unit));
  if (opt_.max_units < 1 || opt_.max_units > 1024)
    throw UsageError("max_units", fmt::format("{} is outside 1..1024 (times the base batch)", opt_.max_units));
  if (opt_.every < 1) throw UsageError("adapt_every", fmt::format("{} is not a positive number of steps", opt_.every));
  if (opt_.max_micro_batch < 1)
    throw UsageError("micro_batch", fmt::format("the largest micro-batch {} is not positive (`adaptive`)", opt_.max_micro_batch));
  if (!(opt_.min_gain >= 1)) throw UsageError("min_gain", fmt::format("{} is below 1", opt_.min_gain));
  if (!(opt_.step_comm_ms >= 0))
    throw UsageError("step_comm_ms", fmt::format("{} is not a time in ms (0 or more)", opt_.step_comm_ms));
  if (!has_ok_point(opt_.curve)) throw UsageError("`adaptive`: the throughput curve has no batch that ran");
  if (!opt_.ranks.empty()) {
    if (opt_.rank < 0 || static_cast<size_t>(opt_.rank) >= opt_.ranks.size() ||
        static_cast<int>(opt_.ranks.size()) != opt_.world_size)
      throw InternalError(fmt::format("`adaptive`: rank {} of {} ranks with {} described", opt_.rank, opt_.world_size,
                                      opt_.ranks.size()));
    const AdaptiveRank& mine = opt_.ranks[static_cast<size_t>(opt_.rank)];
    if (mine.unit != opt_.unit || mine.max_micro_batch != opt_.max_micro_batch)
      throw InternalError("`adaptive`: this rank's unit or micro-batch differs from its entry among the ranks");
    for (size_t r = 0; r < opt_.ranks.size(); ++r)
      if (opt_.ranks[r].unit < 1 || opt_.ranks[r].max_micro_batch < 1 || !has_ok_point(opt_.ranks[r].curve))
        throw RuntimeFailure(fmt::format("`adaptive`: rank {} has a share of {}, a largest micro-batch of {} and {} "
                                         "throughput curve; every rank needs a share and a batch that ran",
                                         r, opt_.ranks[r].unit, opt_.ranks[r].max_micro_batch,
                                         has_ok_point(opt_.ranks[r].curve) ? "a" : "no timed point on its"));
  }
}

int64_t AdaptiveBatch::base_batch() const {
  if (opt_.ranks.empty()) return opt_.unit * opt_.world_size;
  int64_t base = 0;
  for (const AdaptiveRank& r : opt_.ranks) base += r.unit;
  return base;
}

int64_t AdaptiveBatch::micro_batch() const { return std::min(rank_batch(), opt_.max_micro_batch); }

double AdaptiveBatch::step_samples_per_s(int64_t units) const {
  const double comm_s = opt_.step_comm_ms / 1e3;
  if (opt_.ranks.empty()) {
    const int64_t rank = units * opt_.unit;
    const double computing = curve_samples_per_s(opt_.curve, std::min(rank, opt_.max_micro_batch));
    return comm_s > 0 && computing > 0 ? static_cast<double>(rank) / (static_cast<double>(rank) / computing + comm_s)
                                       : computing;
  }
  // the ranks step together: the step takes the slowest rank's time on its own share
  double slowest_s = 0;
  for (const AdaptiveRank& r : opt_.ranks) {
    const int64_t rank = units * r.unit;
    const double computing = curve_samples_per_s(r.curve, std::min(rank, r.max_micro_batch));
    if (!(computing > 0)) return 0;
    slowest_s = std::max(slowest_s, static_cast<double>(rank) / computing);
  }
  return static_cast<double>(units * base_batch()) / (slowest_s + comm_s);
}

double AdaptiveBatch::goodput(int64_t units, std::optional<double> noise_scale) const {
  const int64_t base = base_batch();
  return step_samples_per_s(units) * statistical_efficiency(noise_scale, base, units * base);
}

bool AdaptiveBatch::after_step(int64_t step, std::optional<double> noise_scale) {
  if ((step + 1) % opt_.every != 0 || !noise_scale) return false;
  const int64_t base = base_batch();
  // the batch with the most goodput among 1, 2, 4, ... units; taken only when clearly better
  const double current = goodput(units_, noise_scale);
  int64_t best = units_;
  double best_goodput = current;
  for (int64_t u = 1; u <= opt_.max_units; u *= 2) {
    const double g = goodput(u, noise_scale);
    if (g > best_goodput) {
      best = u;
      best_goodput = g;
    }
  }
  if (best_goodput < current * opt_.min_gain) {
    best = units_;
    best_goodput = current;
  }
  lr_gain_ = saturate::lr_gain(opt_.lr_rule, noise_scale, base, best * base);
  if (best == units_) return false;
  changes_.push_back({step + 1, units_, best, *noise_scale, best_goodput / current});
  units_ = best;
  return true;
}

void AdaptiveBatch::lower_max_micro_batch(int64_t micro_batch) {
  opt_.max_micro_batch = std::max<int64_t>(1, std::min(opt_.max_micro_batch, micro_batch));
  for (size_t r = 0; r < opt_.ranks.size(); ++r) {
    AdaptiveRank& other = opt_.ranks[r];
    other.max_micro_batch = static_cast<int>(r) == opt_.rank
                                ? opt_.max_micro_batch
                                : std::max<int64_t>(1, (std::min(units_ * other.unit, other.max_micro_batch) + 1) / 2);
  }
}

std::vector<double> AdaptiveBatch::state() const {
  std::vector<double> s = {static_cast<double>(units_), lr_gain_, static_cast<double>(opt_.max_micro_batch),
                           static_cast<double>(base_batch())};
  for (const auto& c : changes_)
    s.insert(s.end(), {static_cast<double>(c.step), static_cast<double>(c.old_units), static_cast<double>(c.new_units),
                       c.noise_scale, c.goodput_gain});
  return s;
}

void AdaptiveBatch::load_state(const std::vector<double>& s) {
  if (s.size() < 4 || (s.size() - 4) % 5 != 0 || s[0] < 1)
    throw UsageError(fmt::format("a saved `adaptive` state of {} values is not one this version wrote", s.size()));
  const auto base = static_cast<int64_t>(s[3]);
  if (base != base_batch())
    throw UsageError("base_batch", fmt::format("{} differs from the resumed run's {}: the data position counts base "
                                               "batches; resume with `base_batch` {}",
                                               base_batch(), base, base));
  units_ = static_cast<int64_t>(s[0]);
  lr_gain_ = s[1];
  if (opt_.ranks.empty()) opt_.max_micro_batch = static_cast<int64_t>(s[2]);
  changes_.clear();
  for (size_t i = 4; i + 4 < s.size(); i += 5)
    changes_.push_back({static_cast<int64_t>(s[i]), static_cast<int64_t>(s[i + 1]), static_cast<int64_t>(s[i + 2]),
                        s[i + 3], s[i + 4]});
}

}  // namespace saturate

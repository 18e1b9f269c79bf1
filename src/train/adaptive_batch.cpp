#include "saturate/train/adaptive_batch.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/search/goodput.h"

namespace saturate {

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
  if (std::none_of(opt_.curve.points.begin(), opt_.curve.points.end(), [](const ThroughputPoint& p) { return p.ok; }))
    throw UsageError("`adaptive`: the throughput curve has no batch that ran");
}

int64_t AdaptiveBatch::micro_batch() const { return std::min(rank_batch(), opt_.max_micro_batch); }

double AdaptiveBatch::samples_per_s(int64_t micro) const {
  // the largest timed batch at or below the micro-batch (a step function: never optimistic)
  double best = 0;
  int64_t at = 0;
  for (const auto& p : opt_.curve.points)
    if (p.ok && p.batch <= micro && p.batch >= at) {
      at = p.batch;
      best = p.samples_per_s;
    }
  if (at == 0)  // below the smallest timed batch: the smallest one's, scaled down
    for (const auto& p : opt_.curve.points)
      if (p.ok) return p.samples_per_s * static_cast<double>(micro) / static_cast<double>(p.batch);
  return best;
}

double AdaptiveBatch::goodput(int64_t units, std::optional<double> noise_scale) const {
  const int64_t rank = units * opt_.unit;
  const int64_t micro = std::min(rank, opt_.max_micro_batch);
  const int64_t base = opt_.unit * opt_.world_size, global = rank * opt_.world_size;
  const double computing = samples_per_s(micro);
  const double per_s = opt_.step_comm_ms > 0 && computing > 0
                           ? static_cast<double>(rank) / (static_cast<double>(rank) / computing + opt_.step_comm_ms / 1e3)
                           : computing;
  return per_s * statistical_efficiency(noise_scale, base, global);
}

bool AdaptiveBatch::after_step(int64_t step, std::optional<double> noise_scale) {
  if ((step + 1) % opt_.every != 0 || !noise_scale) return false;
  const int64_t base = opt_.unit * opt_.world_size;
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
}

std::vector<double> AdaptiveBatch::state() const {
  std::vector<double> s = {static_cast<double>(units_), lr_gain_, static_cast<double>(opt_.max_micro_batch),
                           static_cast<double>(opt_.unit * opt_.world_size)};
  for (const auto& c : changes_)
    s.insert(s.end(), {static_cast<double>(c.step), static_cast<double>(c.old_units), static_cast<double>(c.new_units),
                       c.noise_scale, c.goodput_gain});
  return s;
}

void AdaptiveBatch::load_state(const std::vector<double>& s) {
  if (s.size() < 4 || (s.size() - 4) % 5 != 0 || s[0] < 1)
    throw UsageError(fmt::format("a saved `adaptive` state of {} values is not one this version wrote", s.size()));
  const auto base = static_cast<int64_t>(s[3]);
  if (base != opt_.unit * opt_.world_size)
    throw UsageError("base_batch", fmt::format("{} differs from the resumed run's {}: the data position counts base "
                                               "batches; resume with `base_batch` {}",
                                               opt_.unit * opt_.world_size, base, base));
  units_ = static_cast<int64_t>(s[0]);
  lr_gain_ = s[1];
  opt_.max_micro_batch = static_cast<int64_t>(s[2]);
  changes_.clear();
  for (size_t i = 4; i + 4 < s.size(); i += 5)
    changes_.push_back({static_cast<int64_t>(s[i]), static_cast<int64_t>(s[i + 1]), static_cast<int64_t>(s[i + 2]),
                        s[i + 3], s[i + 4]});
}

}  // namespace saturate

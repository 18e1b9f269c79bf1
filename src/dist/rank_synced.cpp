// Rank-synced search: one all-reduce per trial (see dist/rank_synced.h).
#include "saturate/dist/rank_synced.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace saturate {
namespace {

// status flags, ordered by precedence when ranks disagree: error > oom > over-target > ok
enum Slot : size_t {
  kError,
  kOom,
  kOverTarget,
  kPeakAllocated,
  kPeakReserved,
  kStepTimeNs,
  kSteps,
  kBaseline,
  kAfter,
  kSecondsNs,
  kNegBudget,  // min via max of the negation
  kOwnStepNs,  // a step's own time (less its wait for a CPU): the slowest rank's
  kNoOwn,      // some rank could not tell its own time
  kSlots
};

}  // namespace

RankSyncedRunner::RankSyncedRunner(TrialRunner& local, Collectives& comm) : local_(local), comm_(comm) {
  const auto v = comm_.all_reduce_max({-local_.budget_bytes(), local_.granularity_bytes()});
  budget_bytes_ = -v[0];
  granularity_bytes_ = v[1];
}

Trial RankSyncedRunner::run(int64_t batch, const TrialRequest& request) {
  // each rank runs under its own budget (an OOM on the smallest is an OOM for all), so the
  // larger ranks' trials also tell how far they could go alone
  Trial t;
  try {
    t = local_.run(batch, request);
  } catch (const std::exception& e) {
    t.batch = batch;
    t.status = TrialStatus::kError;
    t.error = e.what();
  }
  local_trials_.push_back(t);

  std::vector<int64_t> v(kSlots, 0);
  v[kError] = t.status == TrialStatus::kError;
  v[kOom] = t.status == TrialStatus::kOom;
  v[kOverTarget] = t.status == TrialStatus::kOverTarget;
  v[kPeakAllocated] = t.peak_allocated_bytes;
  v[kPeakReserved] = t.peak_reserved_bytes;
  v[kStepTimeNs] = static_cast<int64_t>(std::llround(t.step_time_ms * 1e6));
  v[kSteps] = t.steps;
  v[kBaseline] = t.baseline_bytes;
  v[kAfter] = t.after_bytes;
  v[kSecondsNs] = static_cast<int64_t>(std::llround(t.seconds * 1e9));
  v[kNegBudget] = -t.budget_bytes;
  v[kOwnStepNs] = t.own_samples_per_s > 0 ? static_cast<int64_t>(std::llround(static_cast<double>(batch) * 1e9 /
                                                                               t.own_samples_per_s))
                                          : 0;
  v[kNoOwn] = t.own_samples_per_s > 0 ? 0 : 1;
  // which ranks failed, for the message: one flag per rank
  std::vector<int64_t> failed(static_cast<size_t>(comm_.world_size()), 0);
  failed[static_cast<size_t>(comm_.rank())] = t.status == TrialStatus::kOk ? 0 : static_cast<int64_t>(t.status) + 1;
  v.insert(v.end(), failed.begin(), failed.end());
  const std::vector<int64_t> all = comm_.all_reduce_max(v);

  Trial out = t;
  out.batch = batch;
  out.status = all[kError]        ? TrialStatus::kError
               : all[kOom]        ? TrialStatus::kOom
               : all[kOverTarget] ? TrialStatus::kOverTarget
                                  : TrialStatus::kOk;
  out.peak_allocated_bytes = all[kPeakAllocated];
  out.peak_reserved_bytes = all[kPeakReserved];
  out.steps = all[kSteps];
  out.baseline_bytes = all[kBaseline];
  out.after_bytes = all[kAfter];
  out.seconds = static_cast<double>(all[kSecondsNs]) / 1e9;
  out.budget_bytes = -all[kNegBudget];
  if (out.ok()) {
    out.step_time_ms = static_cast<double>(all[kStepTimeNs]) / 1e6;  // the slowest rank sets the pace
    out.samples_per_s = out.step_time_ms > 0 ? static_cast<double>(batch) * 1000.0 / out.step_time_ms : 0;
    // the same on every rank (what a throughput curve reads, so that its rounds agree)
    out.own_samples_per_s = all[kNoOwn] || all[kOwnStepNs] <= 0
                                ? 0
                                : static_cast<double>(batch) * 1e9 / static_cast<double>(all[kOwnStepNs]);
    out.error.clear();
  } else {
    out.step_time_ms = 0;
    out.samples_per_s = 0;
    out.own_samples_per_s = 0;
    std::string ranks;
    for (int r = 0; r < comm_.world_size(); ++r)
      if (all[kSlots + static_cast<size_t>(r)] == static_cast<int64_t>(out.status) + 1)
        ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    const std::string own = t.status == out.status && !t.error.empty() ? ": " + t.error : "";
    out.error = fmt::format("{} on rank {}{}", to_string(out.status), ranks, own);
  }
  out.findings.rank_status = to_string(t.status);
  return out;
}

std::vector<RankMax> rank_maxima(RankSyncedRunner& runner, const SearchOptions& options, bool refine) {
  RankMax mine;
  mine.rank = runner.comm().rank();
  mine.budget_bytes = runner.local_budget_bytes();
  const auto& trials = runner.local_trials();
  auto fits = [&](const Trial& t) { return t.ok(); };
  for (const Trial& t : trials)
    if (fits(t)) mine.max_batch = std::max(mine.max_batch, t.batch);
  for (const Trial& t : trials)  // an OOM under this rank's full budget just above its max
    if (t.status == TrialStatus::kOom && t.batch == mine.max_batch + 1) mine.exact = true;
  if (refine && !mine.exact) {
    SearchOptions local = options;
    local.on_trial = nullptr;
    const SearchResult r = search_batch_size(runner.local(), local);
    if (r.error.empty() && r.max_batch >= mine.max_batch) {
      mine.max_batch = r.max_batch;
      mine.exact = r.max_batch_exact;
    }
  }
  const auto all = runner.comm().all_gather({mine.budget_bytes, mine.max_batch, mine.exact ? 1 : 0});
  std::vector<RankMax> out;
  for (int r = 0; r < runner.comm().world_size(); ++r) {
    const size_t i = static_cast<size_t>(r) * 3;
    out.push_back({r, all[i], all[i + 1], all[i + 2] != 0});
  }
  return out;
}

void add_rank_json(nlohmann::json& j, int world_size, const std::vector<RankMax>& ranks) {
  j["world_size"] = world_size;
  nlohmann::json a = nlohmann::json::array();
  for (const RankMax& r : ranks)
    a.push_back({{"rank", r.rank},
                 {"budget_bytes", r.budget_bytes},
                 {"max_batch", r.max_batch},
                 {"max_batch_exact", r.exact}});
  j["ranks"] = a;
}

ThroughputCurve slowest_curve_across_ranks(const ThroughputCurve& mine, const std::vector<int64_t>& planned,
                                           Collectives& comm) {
  // per planned point, as maxima: -samples/s (in milli-samples/s), not ok, not settled, -rounds,
  // the relative standard error (in 1e-9), the stddev (milli-samples/s); then the seconds (ns)
  constexpr size_t kFields = 6;
  const size_t n = planned.size();
  std::vector<int64_t> v(kFields * n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    const ThroughputPoint* p = nullptr;
    for (const ThroughputPoint& q : mine.points)
      if (q.batch == planned[i]) p = &q;
    const bool ok = p && p->ok && p->samples_per_s > 0;
    int64_t* f = &v[kFields * i];
    f[0] = ok ? -std::llround(p->samples_per_s * 1e3) : 0;
    f[1] = ok ? 0 : 1;
    f[2] = ok && p->settled ? 0 : 1;
    f[3] = ok ? -p->rounds : 0;
    f[4] = ok ? std::llround(p->rel_std_error * 1e9) : 0;
    f[5] = ok ? std::llround(p->stddev * 1e3) : 0;
  }
  v[kFields * n] = std::llround(mine.seconds * 1e9);
  const std::vector<int64_t> all = comm.all_reduce_max(v);
  ThroughputCurve out;
  out.knee_fraction = mine.knee_fraction;
  out.trial_steps = mine.trial_steps;
  out.seconds = static_cast<double>(all[kFields * n]) / 1e9;
  for (size_t i = 0; i < n; ++i) {
    const int64_t* f = &all[kFields * i];
    ThroughputPoint p;
    p.batch = planned[i];
    p.ok = f[1] == 0;
    if (!p.ok) {
      p.error = "did not run on every rank";
      for (const ThroughputPoint& q : mine.points)
        if (q.batch == p.batch && !q.ok && !q.error.empty()) p.error = q.error;
      out.points.push_back(p);
      // past a point that ran, a failure ends the curve (as measure_throughput_curve's); at the
      // bottom (BatchNorm refuses a batch of 1) the next batch may run
      const bool ran_below = std::any_of(out.points.begin(), out.points.end(), [](const ThroughputPoint& q) { return q.ok; });
      if (ran_below) break;
      continue;
    }
    p.samples_per_s = static_cast<double>(-f[0]) / 1e3;
    p.settled = f[2] == 0;
    p.rounds = static_cast<int>(-f[3]);
    p.rel_std_error = static_cast<double>(f[4]) / 1e9;
    p.stddev = static_cast<double>(f[5]) / 1e3;
    out.points.push_back(p);
  }
  summarize_curve(out);
  return out;
}

DistSearchResult search_across_ranks(TrialRunner& runner, const SearchOptions& options, Collectives* comm,
                                     bool exact_ranks) {
  DistSearchResult out;
  if (!comm) {
    out.result = search_batch_size(runner, options);
    return out;
  }
  RankSyncedRunner synced(runner, *comm);
  out.result = search_batch_size(synced, options);
  if (out.result.error.empty()) out.ranks = rank_maxima(synced, options, exact_ranks);
  return out;
}

}  // namespace saturate

// Rank-synced search: one all-reduce per trial (see dist/rank_synced.h).
#include "saturate/dist/rank_synced.h"

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
    out.error.clear();
  } else {
    out.step_time_ms = 0;
    out.samples_per_s = 0;
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

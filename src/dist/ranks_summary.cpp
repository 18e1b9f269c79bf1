#include "saturate/dist/ranks_summary.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include <fmt/format.h>

namespace saturate {

double TrainRanksSummary::most_wait_ms() const {
  double most = 0;
  for (const RankTraining& r : ranks) most = std::max(most, r.wait_ms);
  return most;
}

int TrainRanksSummary::straggler() const {
  if (ranks.size() < 2 || step_ms <= 0 || most_wait_ms() < 0.1 * step_ms) return -1;
  // the rank that waits least is the one the others wait for
  return std::min_element(ranks.begin(), ranks.end(),
                          [](const RankTraining& a, const RankTraining& b) { return a.wait_ms < b.wait_ms; })
      ->rank;
}

void note_straggler(BottleneckFinding& verdict, const TrainRanksSummary& ranks, int rank) {
  const int slow = ranks.straggler();
  if (slow < 0 || rank < 0 || static_cast<size_t>(rank) >= ranks.ranks.size()) return;
  const double step = ranks.step_ms;
  const std::string cure = ranks.shares_by == "speed"
                               ? "the shares were split by the speeds measured before training, which moved since: "
                                 "train again with `shares` auto to measure them anew"
                               : "`shares` auto gives each rank a share of the global batch in proportion to its "
                                 "speed, so that none waits";
  if (rank == slow) {
    verdict.evidence["straggler"] = {{"rank", slow}, {"others_wait_ms", ranks.most_wait_ms()}, {"step_ms", step}};
    verdict.reason += fmt::format("; this rank is the straggler: another waits {:.1f} ms of each {:.1f} ms step for it",
                                  ranks.most_wait_ms(), step);
    verdict.fix += "; or give this rank less of the global batch: " + cure;
    return;
  }
  const double wait = ranks.ranks[static_cast<size_t>(rank)].wait_ms;
  verdict.evidence["straggler"] = {
      {"rank", slow}, {"wait_ms", wait}, {"step_ms", step}, {"wait_share", step > 0 ? wait / step : 0.0}};
  verdict.reason += fmt::format("; {:.1f} ms of each {:.1f} ms step ({:.0f} %) is waiting for rank {}, the straggler",
                                wait, step, step > 0 ? 100 * wait / step : 0.0, slow);
  if (verdict.verdict == "communication-bound")
    verdict.fix = fmt::format("the all-reduce is mostly waiting for rank {} (the last rank to arrive all-reduces in "
                              "{:.2f} ms), not the network: {}",
                              slow, ranks.last_rank_allreduce_ms, cure);
}

void TrainRanksSummary::add_to_json(nlohmann::json& j) const {
  j.update({{"world_size", world_size},
            {"parallel", parallel},
            {"data_parallel_devices", data_parallel_devices},
            {"backend", backend},
            {"allreduce_ms", allreduce_ms},
            {"allreduce_overlap_fraction",
             allreduce_overlap_fraction ? nlohmann::json(*allreduce_overlap_fraction) : nlohmann::json()},
            {"gradient_buckets", gradient_buckets},
            {"gradient_bytes", gradient_bytes}});
  if (network) {
    nlohmann::json n = to_json(*network);
    n["predicted_allreduce_ms"] = predicted_allreduce_ms;  // per synced step, for these buckets
    n["backward_beside_buckets_ms"] = backward_beside_buckets_ms;
    n["measured_allreduce_ms"] = allreduce_ms;
    // the same, as the last rank to arrive saw it (no wait for a peer in it): the wire's time
    n["measured_last_rank_allreduce_ms"] = last_rank_allreduce_ms;
    j["network"] = n;
  }
  if (!ranks.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const RankTraining& r : ranks) {
      a.push_back({{"rank", r.rank}, {"budget_bytes", r.budget_bytes}, {"micro_batch", r.micro_batch},
                   {"accumulation", r.accumulation}, {"share", r.share}, {"samples_per_s", r.samples_per_s},
                   {"wait_ms", r.wait_ms}});
      if (shares_by == "speed") a.back()["measured_samples_per_s"] = r.measured_samples_per_s;
      if (r.max_batch > 0) {
        a.back()["max_batch"] = r.max_batch;
        a.back()["max_batch_exact"] = r.max_batch_exact;
      }
    }
    j["ranks"] = a;
    j["shares_by"] = shares_by;
    if (share_balance.every_steps.value_or(0) > 0) {  // the re-splits during training
      nlohmann::json changes = nlohmann::json::array();
      for (const ShareBalance& c : share_changes)
        changes.push_back({{"step", c.step}, {"from", c.shares}, {"to", c.proposed}, {"busy_ms", c.busy_ms},
                           {"samples_per_s", c.samples_per_s}, {"predicted_speedup", c.gain}});
      j["share_balance"] = {{"every_steps", *share_balance.every_steps}, {"min_gain", share_balance.min_gain},
                            {"looks", share_looks}, {"changes", changes}};
    }
    if (const int s = straggler(); s >= 0) j["straggler"] = {{"rank", s}, {"most_wait_ms", most_wait_ms()}, {"step_ms", step_ms}};
  }
  if (!compression_by.empty()) {
    nlohmann::json c = {{"chosen", compress_bf16 ? "bf16" : "none"}, {"by", compression_by}};
    if (compression_by == "measured") c["min_speedup"] = min_compression_speedup;
    if (network && network->compressed_allreduce_ms > 0) {
      c["speedup"] = compression_speedup;  // the ranks' mean
      c["speedup_this_rank"] = network->compression_speedup();
      c["relative_error"] = network->compression_error;
    }
    j["gradient_compression"] = c;
  }
  if (bucket_tuning) j["gradient_bucket_tuning"] = to_json(*bucket_tuning);
}

}  // namespace saturate

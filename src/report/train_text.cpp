#include "saturate/report/train_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "saturate/core/units.h"
#include "saturate/data/batch_plan.h"

namespace saturate {

namespace {

/// "compression bf16 all-reduce (measured 1.92x faster, gradients within 0.31 %)", or why not.
std::string compression_text(const TrainRanksSummary& r) {
  if (r.compression_by.empty()) return "";
  const NetworkMeasure* n = r.network && r.network->compressed_allreduce_ms > 0 ? &*r.network : nullptr;
  const std::string measured =
      n ? fmt::format("{:.2f} ms in bf16 vs {:.2f} ms in float32 at {} on rank 0, {:.2f}x on the ranks' mean; "
                      "gradients within {:.2f} %",
                      n->compressed_allreduce_ms, n->allreduce_ms, format_bytes(n->bytes), r.compression_speedup,
                      100 * n->compression_error)
        : std::string("not measured");
  if (r.compression_by == "named") return fmt::format("compression bf16 all-reduce (named; {})\n", measured);
  if (r.compress_bf16) return fmt::format("compression bf16 all-reduce (kept: {})\n", measured);
  return fmt::format("compression none (bf16 not kept: {}, under the {:.2f}x it needs)\n", measured,
                     r.min_compression_speedup);
}

/// A line per rank: "rank 1      share 16 of 64 = micro 16 x 1, budget 24.0 MiB, 5210 samples/s, waits 3.10 ms a step".
std::string rank_rows_text(const TrainRanksSummary& r) {
  int64_t global = 0;
  for (const RankTraining& row : r.ranks) global += row.share;
  std::string text;
  if (r.shares_by == "speed" && !r.ranks.empty()) {
    text += "shares      by speed (each rank's step timed alone at its micro-batch):";
    for (const RankTraining& row : r.ranks)
      text += fmt::format(" rank {} {:.0f} samples/s -> {}{}", row.rank, row.measured_samples_per_s, row.share,
                          row.rank + 1 < static_cast<int>(r.ranks.size()) ? ";" : "\n");
  }
  for (const RankTraining& row : r.ranks)
    text += fmt::format("rank {:<7}share {} of {} = micro {} x {}{}, budget {}, {:.0f} samples/s, waits {:.2f} ms a step\n",
                        row.rank, row.share, global, row.micro_batch, row.accumulation,
                        row.max_batch > 0 ? fmt::format(" (its max {}{})", row.max_batch,
                                                        row.max_batch_exact ? ", exact" : "")
                                          : std::string(),
                        row.budget_bytes > 0 ? format_bytes(row.budget_bytes) : std::string("the device's"),
                        row.samples_per_s, row.wait_ms);
  if (const int s = r.straggler(); s >= 0)
    text += fmt::format("straggler   rank {}: another rank waits {:.1f} ms of each {:.1f} ms step for it{}\n", s,
                        r.most_wait_ms(), r.step_ms,
                        r.shares_by == "speed" ? std::string(" (shares by speed as measured before training: the speeds "
                                                             "moved since)")
                                               : std::string("; `shares` auto splits the global batch by each rank's "
                                                             "speed"));
  return text;
}

/// ", written by 2 rank(s) with shares 48,16": how the checkpointed run split its global batch,
/// where this run splits it otherwise ("" where the same).
std::string resumed_split_text(const TrainResult& r, const TrainRanksSummary& ranks) {
  std::vector<int64_t> shares;  // this run's, where unequal
  if (ranks.shares_by != "equal")
    for (const RankTraining& row : ranks.ranks) shares.push_back(row.share);
  if (r.resumed_world_size <= 0 || (r.resumed_world_size == ranks.world_size && r.resumed_shares == shares)) return "";
  return fmt::format(", written by {} rank(s) with {}", r.resumed_world_size,
                     r.resumed_shares.empty() ? std::string("equal shares")
                                              : fmt::format("shares {}", fmt::join(r.resumed_shares, ",")));
}

}  // namespace

std::string train_rank_text(const TrainRanksSummary& r) {
  if (r.backend == "none") return "";
  return fmt::format("ranks       {} ({}): all-reduce {:.2f} ms per step, {:.0f} % overlapped with backward, {} "
                     "bucket(s) of {} in all\n",
                     r.world_size, r.backend, r.allreduce_ms, 100.0 * r.allreduce_overlap_fraction.value_or(0),
                     r.gradient_buckets, format_bytes(r.gradient_bytes)) +
         (r.network ? fmt::format("network     all-reduce bus bandwidth {:.1f} MB/s, latency {:.2f} ms (measured at {}; "
                                  "{:.2f}x the time beside computation); per step predicted {:.2f} ms, measured "
                                  "{:.2f} ms ({:.2f} ms as the last rank to arrive saw it: the rest is waiting for a "
                                  "peer)\n",
                                  r.network->busbw_bytes_per_s / 1e6, r.network->latency_ms,
                                  format_bytes(r.network->bytes), r.network->overlap_slowdown(),
                                  r.predicted_allreduce_ms, r.allreduce_ms, r.last_rank_allreduce_ms)
                    : "") +
         compression_text(r) + (r.bucket_tuning ? "buckets     " + bucket_tuning_text(*r.bucket_tuning) + "\n" : "") +
         rank_rows_text(r);
}

namespace {

std::string optional_lines(const TrainSummary& s) {
  std::string text;
  if (s.noise)
    text += fmt::format("noise scale {} (B_simple, smoothed over the last ~20 of {} steps measured)\n",
                        s.noise->value ? fmt::format("{:.0f} samples", *s.noise->value)
                                       : std::string("not measurable (the gradient is all noise)"),
                        s.noise->measurements);
  // the held-out split's results under its name: "test" or "val"
  const TrainResult& r = s.result;
  if (!s.eval_split.empty() && r.final_test_accuracy)
    text += fmt::format("{:<12}loss {:.4f}, accuracy {:.2f} %\n", s.eval_split, r.final_test_loss.value_or(0),
                        100.0 * *r.final_test_accuracy);
  if (s.eval_search)
    text += fmt::format("eval batch  {} (searched on its own: max {}{}, {} trials)\n", s.eval_batch,
                        s.eval_search->max_batch,
                        s.eval_search->max_batch_exact ? fmt::format(", {} does not fit", s.eval_search->max_batch + 1)
                                                       : s.eval_search->capped ? ", all of the evaluation data" : "",
                        s.eval_search->trials.size());
  if (s.workers_auto)
    text += fmt::format("workers     {} (auto: {})\n", s.workers, s.workers_auto->reason);
  if (s.compute && s.compute->mfu)
    text += fmt::format("compute     {}/sample, {}/s = {:.1f} % MFU of {}/s ({})\n",
                        format_flops(s.compute->flops_per_sample), format_flops(s.compute->achieved_flops_per_s),
                        100 * *s.compute->mfu, format_flops(s.compute->peak_flops_per_s), s.compute->peak_method);
  else if (s.compute)
    text += fmt::format("compute     {}/sample, {}/s; {}\n", format_flops(s.compute->flops_per_sample),
                        format_flops(s.compute->achieved_flops_per_s), s.compute->mfu_note);
  return text;
}

}  // namespace

std::string train_summary_text(const TrainSummary& s, const TrainRanksSummary& ranks) {
  const TrainResult& r = s.result;
  std::string text = fmt::format(
      "trained     {} on {}: {} steps, {} samples, {:.2f} epochs\nbatch       {}\n"
      "train loss  {:.4f}\n",
      s.context.model_name, s.data, r.steps, r.samples_seen, r.epochs,
      rank_batch_arithmetic(r.micro_batch, r.accumulation,
                            ranks.shares_by != "equal" && static_cast<size_t>(ranks.rank) < ranks.ranks.size()
                                ? ranks.ranks[static_cast<size_t>(ranks.rank)].share
                                : 0,
                            ranks.world_size, r.global_batch, "micro", "global"),
      r.final_train_loss);
  if (s.monitor && s.monitor->bottleneck)
    text += fmt::format("bottleneck  {}: {}\nfix         {}\n", s.monitor->bottleneck->verdict,
                        s.monitor->bottleneck->reason, s.monitor->bottleneck->fix);
  text += train_rank_text(ranks);
  text += optional_lines(s);
  text += fmt::format("throughput  {:.1f} samples/s\noom backoffs {}{}\ncheckpoints {}{}{}\n", r.samples_per_s,
                      r.oom_backoffs.size(),
                      r.eval_oom_backoffs.empty()
                          ? std::string()
                          : fmt::format(" (evaluation: {}, now in chunks of {}; the training batch is unchanged)",
                                        r.eval_oom_backoffs.size(), r.eval_oom_backoffs.back().new_micro_batch), r.checkpoints_written,
                      r.resumed_from ? fmt::format(" (resumed from step {}{})", *r.resumed_from, resumed_split_text(r, ranks))
                                     : "",
                      r.checkpoints_failed ? fmt::format(", {} FAILED (first {})", r.checkpoints_failed, r.checkpoint_error)
                                           : "");
  if (s.interrupted)
    text += fmt::format("interrupted by {} after step {}: {}\n", s.interrupted->signal, s.interrupted->after_step,
                        !s.interrupted->checkpoint.empty()
                            ? fmt::format("checkpoint written; continue with `resume` {}", s.interrupted->checkpoint)
                        : r.checkpoints_failed ? std::string("its checkpoint was not written (see checkpoints)")
                                               : std::string("no checkpoint (give `checkpoint_dir` DIR to keep the progress)"));
  return text;
}

std::string checkpoint_failure_text(const TrainResult& r, const std::string& checkpoint_dir,
                                    const std::vector<std::pair<std::string, std::string>>& kept) {
  if (r.checkpoints_failed == 0) return "";
  std::string written;
  for (const auto& [option, path] : kept)
    if (!path.empty()) written += fmt::format("{}`{}` {}", written.empty() ? "" : ", ", option, path);
  return fmt::format("{} of {} checkpoint write(s) into `checkpoint_dir` {} failed, the first {}; the run trained to "
                     "the end and kept {}; not kept: the failed checkpoints ({}); free the space or give a folder "
                     "that can be written",
                     r.checkpoints_failed, r.checkpoints_failed + r.checkpoints_written, checkpoint_dir, r.checkpoint_error,
                     written.empty() ? std::string("the summary above") : written,
                     r.checkpoints_written ? "the folder holds the last one written" : "the folder holds none");
}

}  // namespace saturate

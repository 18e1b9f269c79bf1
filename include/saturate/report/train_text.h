// Implements: train's summary for people, read from the summary JSON the command writes, so that
// the console and the JSON can never disagree: what trained on what, the batch plan, the losses,
// the bottleneck, the ranks, the noise scale, the compute, the throughput, the checkpoints and an
// interruption.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace saturate {

/// The summary's lines from train's summary JSON: model.name, data, steps, samples_seen, epochs,
/// micro_batch, accumulation, global_batch, final_train_loss, bottleneck, the DDP keys (see
/// train_rank_text), gradient_noise_scale, eval_split with final_<split>_loss/_accuracy, the
/// compute keys (flops_per_sample, achieved_flops_per_s, mfu, peak_flops_per_s, peak_method),
/// samples_per_s, oom_backoffs, checkpoints_written, resumed_from, interrupted.
std::string train_summary_text(const nlohmann::json& j);
/// "ranks       2 (gloo): all-reduce 3.10 ms per step, 41 % overlapped with backward, 4 bucket(s)
/// of 1.2 MiB in all" from world_size, backend, allreduce_ms, allreduce_overlap_fraction,
/// gradient_buckets and gradient_bytes ("" when backend is "none": no DDP).
std::string train_rank_text(const nlohmann::json& j);

}  // namespace saturate

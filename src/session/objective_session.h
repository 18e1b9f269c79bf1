// Implements: the objective (search/objective.h) on a probe: the throughput curve timed with the
// probe's step, and for goodput the noise scale measured with the built-in step on the data's
// batches (a fresh optimizer, learning rate 0, weights put back). Used by `search`, `train` and
// `train --adaptive`; Python's user steps measure their noise scale through user_search.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "saturate/probe/probe.h"
#include "saturate/step/model_snapshot.h"
#include "saturate/search/objective.h"

namespace saturate {
class DistGroup;  // dist/process_group.h

/// AdaScale's gain for SGD, its square root for Adam and AdamW.
LrRule lr_rule_for(const Workload& workload);

/// The noise scale of `probe`'s workload, with the probe's precision, checkpointing and fast
/// paths, on batches from `next_batch`, at the weights `initial` holds (restored first: the
/// trials before it took optimizer steps on synthetic labels; nullptr: the weights as they are).
NoiseMeasure workload_noise_measure(Probe& probe, std::function<Batch(int64_t)> next_batch,
                                    ModelSnapshot* initial = nullptr);

/// pick_by_objective on the probe's workload: its learning-rate rule, its noise scale on
/// `next_batch`'s batches (`data` names them) at the weights `initial` holds.
ObjectiveOutcome pick_by_objective(Probe& probe, ObjectiveOptions options, int64_t max_batch,
                                   const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                                   const ObjectiveProgress& progress = {}, ModelSnapshot* initial = nullptr,
                                   const ObjectiveRanks& ranks = {});

/// Several ranks: each point's samples/s becomes the slowest rank's (a data-parallel step waits
/// for it), and a point that failed on any rank failed (every rank then decides on the same
/// curve: slowest_curve_across_ranks). No group, or one rank: `curve` unchanged. A collective:
/// every rank calls it with the same options.
ThroughputCurve curve_across_ranks(ThroughputCurve curve, const ThroughputCurveOptions& options, DistGroup* group);

/// The objective's ranks on `group`: the slowest rank's curve, each step with `allreduce_ms` of
/// the gradients' all-reduce (predicted from `network`, which the reason names).
ObjectiveRanks objective_ranks(DistGroup& group, const ObjectiveOptions& options, int64_t max_batch,
                               double allreduce_ms, const std::string& network);

}  // namespace saturate

#include "session/objective_session.h"

#include <utility>
#include <vector>

#include "saturate/dist/process_group.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/step/training_step.h"

namespace saturate {

LrRule lr_rule_for(const Workload& workload) {
  return workload.optimizer_kind() == OptimizerKind::kSgd ? LrRule::kAdaScale : LrRule::kAdaScaleSqrt;
}

NoiseMeasure workload_noise_measure(Probe& probe, std::function<Batch(int64_t)> next_batch, ModelSnapshot* initial) {
  return [&probe, next = std::move(next_batch), initial](int64_t batch, int steps) {
    if (initial) initial->restore();
    StepOptions so;
    so.step_config() = probe.footprint().step_config();
    return measure_noise_scale(probe.workload(), so, next, batch, 0, steps);
  };
}

ObjectiveOutcome pick_by_objective(Probe& probe, ObjectiveOptions options, int64_t max_batch,
                                   const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                                   const ObjectiveProgress& progress, ModelSnapshot* initial,
                                   const ObjectiveRanks& ranks) {
  options.lr_rule = lr_rule_for(probe.workload());
  return pick_by_objective(static_cast<TrialRunner&>(probe), options, max_batch,
                           workload_noise_measure(probe, next_batch, initial), data, progress, ranks);
}

ThroughputCurve curve_across_ranks(ThroughputCurve curve, const ThroughputCurveOptions& options, DistGroup* group) {
  if (!group || group->world_size() <= 1) return curve;
  return slowest_curve_across_ranks(curve, curve_batches(options.min_batch, options.max_batch,
                                                         options.points_per_doubling), *group);
}

ObjectiveRanks objective_ranks(DistGroup& group, const ObjectiveOptions& options, int64_t max_batch,
                               double allreduce_ms, const std::string& network) {
  ObjectiveRanks r;
  r.world_size = group.world_size();
  r.allreduce_ms = allreduce_ms;
  r.network = network;
  const ThroughputCurveOptions co = curve_options(options, max_batch);
  DistGroup* g = &group;
  r.combine = [g, co](const ThroughputCurve& mine) { return curve_across_ranks(mine, co, g); };
  return r;
}

}  // namespace saturate

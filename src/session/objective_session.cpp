#include "saturate/session/objective_session.h"

#include <utility>
#include <vector>

#include "saturate/dist/process_group.h"
#include "saturate/step/training_step.h"

namespace saturate {

LrRule lr_rule_for(const Workload& workload) {
  return workload.optimizer_kind() == OptimizerKind::kSgd ? LrRule::kAdaScale : LrRule::kAdaScaleSqrt;
}

NoiseMeasure workload_noise_measure(Probe& probe, std::function<Batch(int64_t)> next_batch, ModelSnapshot* initial) {
  return [&probe, next = std::move(next_batch), initial](int64_t batch, int steps) {
    if (initial) initial->restore();
    StepOptions so;
    const TrainingFootprint& fp = probe.footprint();
    so.precision = fp.precision;
    so.checkpointing = fp.checkpointing;
    so.fast_paths = fp.fast_paths;
    return measure_noise_scale(probe.workload(), so, next, batch, 0, steps);
  };
}

ObjectiveOutcome pick_by_objective(Probe& probe, ObjectiveOptions options, int64_t max_batch,
                                   const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                                   const ObjectiveProgress& progress, ModelSnapshot* initial) {
  options.lr_rule = lr_rule_for(probe.workload());
  return pick_by_objective(static_cast<TrialRunner&>(probe), options, max_batch,
                           workload_noise_measure(probe, next_batch, initial), data, progress);
}

ThroughputCurve mean_curve_across_ranks(ThroughputCurve curve, const ThroughputCurveOptions& options,
                                        DistGroup* group) {
  if (!group || group->world_size() <= 1) return curve;
  const std::vector<int64_t> planned = curve_batches(options.min_batch, options.max_batch, options.points_per_doubling);
  const size_t n = planned.size();
  std::vector<double> v(2 * n, 0.0);
  for (const auto& p : curve.points)
    for (size_t i = 0; i < n; ++i)
      if (planned[i] == p.batch && p.ok) {
        v[i] = p.samples_per_s;
        v[n + i] = 1;
      }
  const std::vector<double> sums = group->all_reduce_sum(v);
  const double world = group->world_size();
  ThroughputCurve out = curve;
  out.points.clear();
  out.best_samples_per_s = 0;
  out.best_batch = 0;
  for (size_t i = 0; i < n; ++i) {
    ThroughputPoint p;
    p.batch = planned[i];
    p.ok = sums[n + i] == world;
    if (!p.ok) {
      p.error = "failed on a rank (or not timed)";
      out.points.push_back(p);
      break;
    }
    p.samples_per_s = sums[i] / world;
    for (const auto& mine : curve.points)
      if (mine.batch == p.batch) {
        p.rounds = mine.rounds;
        p.rel_std_error = mine.rel_std_error;
        p.stddev = mine.stddev;
        p.settled = mine.settled;
      }
    if (p.samples_per_s > out.best_samples_per_s) {
      out.best_samples_per_s = p.samples_per_s;
      out.best_batch = p.batch;
    }
    out.points.push_back(p);
  }
  out.knee_batch = knee_batch(out.points, out.knee_fraction);
  return out;
}

}  // namespace saturate

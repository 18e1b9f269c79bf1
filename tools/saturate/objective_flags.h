// --objective memory|throughput|goodput (docs/search.md, "Which batch is best"): after the memory
// search, the measured throughput curve up to the recommended batch and, for goodput, the gradient
// noise scale measured on the data's batches at the base batch.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "saturate/probe/probe.h"
#include "saturate/search/goodput.h"
#include "saturate/step/gradient_noise.h"

namespace saturate {
class DistGroup;  // dist/process_group.h
}

namespace saturate::cli {

struct ObjectiveFlags {
  std::string objective = "memory";
  int64_t base_batch = 0;  // 0: 32, or the largest batch when smaller
  int noise_steps = 40;
  double knee_fraction = 0.9;
};
/// --objective, --knee, --noise-steps; --base-batch too unless the command has its own.
void add_objective_flags(CLI::App& app, ObjectiveFlags& f, bool base_batch_flag);
/// Usage errors before any device work.
Objective check_objective_flags(const ObjectiveFlags& f);

struct ObjectiveOutcome {
  Objective objective = Objective::kMemory;
  int64_t batch = 0;
  std::optional<ThroughputCurve> curve;
  std::optional<NoiseScaleMeasurement> noise;
  std::string noise_data;  // where the noise scale's batches came from
  std::optional<GoodputChoice> goodput;
  std::string reason;
};

/// AdaScale's gain for SGD, its square root for Adam and AdamW.
LrRule lr_rule_for(const Workload& workload);
/// Times the curve on `probe` up to `max_batch` and, for goodput, measures the noise scale with
/// `next_batch` ("data" names it). Progress on stderr unless `quiet`.
ObjectiveOutcome pick_by_objective(Probe& probe, const ObjectiveFlags& f, int64_t max_batch,
                                   const std::function<Batch(int64_t)>& next_batch, const std::string& data,
                                   bool quiet);
nlohmann::json objective_json(const ObjectiveOutcome& o);
/// Several ranks: each point's samples/s becomes the ranks' mean, and a point that failed on any
/// rank failed (every rank then decides on the same curve). One process: `curve` unchanged.
ThroughputCurve mean_curve_across_ranks(ThroughputCurve curve, const ThroughputCurveOptions& options,
                                        DistGroup* group);
nlohmann::json curve_json(const ThroughputCurve& c);

}  // namespace saturate::cli

#include "saturate/session/fast_path_trials.h"

#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include "saturate/step/graphed_step.h"

namespace saturate {

FastPathChoice try_fast_paths(Probe& probe, int64_t batch, int timed_steps) {
  const TrainingFootprint start = probe.footprint();
  const auto measure = [&](const FastPaths& paths) {
    TrainingFootprint f = start;
    f.fast_paths = paths;
    probe.set_footprint(f);
    // a graph is captured after 3 eager warm-up steps: the timed steps must be replays
    return probe.run(batch, {paths.cuda_graphs ? 4 : 1, timed_steps, 0});
  };
  // a graph holds one step with no host decisions: not fp16 loss scaling, clipping or checkpointing
  const bool graphable = start.precision != Precision::kFp16 && start.clip_grad_norm == 0 &&
                         !start.checkpointing.enabled() && cuda_graphs_compiled();
  Workload& w = probe.workload();
  const auto candidates = fast_path_candidates(w.device().is_cuda(), has_4d(w.model().parameters()),
                                               start.precision == Precision::kFp32, at::get_num_threads(), graphable);
  FastPathChoice choice;
  try {
    choice = choose_fast_paths(start.fast_paths, candidates, measure);
  } catch (...) {
    probe.set_footprint(start);
    throw;
  }
  probe.set_footprint(start);
  return choice;
}

nlohmann::json to_json(const FastPathChoice& c, int64_t batch) {
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& t : c.tried)
    tried.push_back({{"name", t.name}, {"kept", t.kept}, {"baseline_ms", t.baseline_ms}, {"with_ms", t.with_ms},
                     {"gain", t.gain}, {"note", t.note}});
  return {{"chosen", c.chosen.to_string()}, {"batch", batch},        {"baseline_ms", c.baseline_ms},
          {"chosen_ms", c.chosen_ms},       {"tried", tried}};
}

}  // namespace saturate

// Implements: the fast-path trials (docs/search.md, "Fast paths"; seed B7): at the batch the
// search found, each switch that applies to this device and step (cudnn.benchmark, TF32,
// channels_last, fused optimizers, CUDA graphs, one CPU thread) is timed against the choice so
// far and kept when it makes the step faster. The probe's footprint is put back afterwards.
#pragma once
#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "saturate/probe/probe.h"
#include "saturate/search/fast_path_choice.h"

namespace saturate {

/// Times the candidates at `batch` with `timed_steps` timed steps per trial.
FastPathChoice try_fast_paths(Probe& probe, int64_t batch, int timed_steps);

/// The search JSON's "fast_paths" (chosen, batch, baseline_ms, chosen_ms, tried).
nlohmann::json to_json(const FastPathChoice& c, int64_t batch);

}  // namespace saturate

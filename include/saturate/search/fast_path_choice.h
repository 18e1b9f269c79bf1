// Implements: which framework switches (step/fast_paths.h) to keep — each tried at the chosen
// batch on top of those already kept, and kept only when measured faster. Timings on a shared
// machine drift, so each candidate is compared with the current choice in alternating rounds
// (choice, candidate, choice, candidate, ...) and by medians; a candidate is kept when its median
// step time is at least `min_gain` below the current choice's. A candidate that runs out of
// memory or fails is not kept, and the reason is reported.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "saturate/probe/trial.h"
#include "saturate/step/fast_paths.h"

namespace saturate {

struct FastPathTrial {
  std::string name;          ///< "channels_last", "threads=1", ...
  bool kept = false;
  double baseline_ms = 0;    ///< median step time of the choice before this candidate
  double with_ms = 0;        ///< median step time with it (0: it did not run)
  double gain = 0;           ///< baseline_ms / with_ms - 1 (0.12: 12 % more steps per second)
  std::string note;          ///< why not kept, when it did not run ("oom: ...")
};

struct FastPathChoice {
  FastPaths chosen;
  std::vector<FastPathTrial> tried;
  double baseline_ms = 0;  ///< the starting configuration's median step time
  double chosen_ms = 0;    ///< the chosen configuration's (last compared) median step time
};

struct FastPathChoiceOptions {
  double min_gain = 0.03;  ///< keep a switch only when it makes the step at least this much faster
  int rounds = 3;          ///< timed trials of each side per candidate
};

/// Runs `measure` (one timed trial of a configuration at a fixed batch) for the starting point
/// and each candidate (a configuration = the current choice with one more switch).
using FastPathMeasure = std::function<Trial(const FastPaths&)>;
struct FastPathCandidate {
  std::string name;
  std::function<FastPaths(FastPaths)> apply;  ///< the current choice with this switch on
};

FastPathChoice choose_fast_paths(const FastPaths& start, const std::vector<FastPathCandidate>& candidates,
                                 const FastPathMeasure& measure, const FastPathChoiceOptions& options = {});

/// The candidates worth trying for a device and model: on CUDA cudnn_benchmark and channels_last
/// (models with 4-D weights), tf32 (an fp32 step), fused_optimizer, and cuda_graphs when the step
/// can be captured (`graphable`); on a CPU channels_last (4-D weights), fused_optimizer and half
/// the threads (when there are more than one).
std::vector<FastPathCandidate> fast_path_candidates(bool cuda, bool conv_model, bool fp32_step, int threads,
                                                    bool graphable = false);

}  // namespace saturate

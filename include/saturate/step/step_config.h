// Implements: the settings of one training step, declared once (issue 46): precision, activation
// checkpointing, gradient clipping and the step's fast paths. The step's options (StepOptions),
// a trial's footprint (TrainingFootprint) and the trainer's options (TrainOptions) extend it, and
// each hands it to the next with one assignment (`so.step_config() = train.step_config()`),
// never field by field: a setting added here reaches every step that runs.
#pragma once

#include "saturate/step/activation_checkpoint.h"
#include "saturate/step/fast_paths.h"
#include "saturate/step/precision.h"

namespace saturate {

struct StepConfig {
  Precision precision = Precision::kFp32;
  /// Built-in models' blocks; a model without blocks runs whole.
  CheckpointPolicy checkpointing;
  double clip_grad_norm = 0;  ///< >= 0; 0: no clipping
  /// The step's switches (step/fast_paths.h): channels_last and fused_optimizer act in the step;
  /// the process-wide ones (cudnn_benchmark, tf32, threads) are set around it by its caller.
  FastPaths fast_paths;

  StepConfig& step_config() { return *this; }
  const StepConfig& step_config() const { return *this; }
};

}  // namespace saturate

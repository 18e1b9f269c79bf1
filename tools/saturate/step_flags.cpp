#include "step_flags.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate::cli {

void add_step_flags(CLI::App& app, StepFlags& f, bool allow_auto) {
  f.allow_auto = allow_auto;
  app.add_option("--precision", f.precision,
                 "fp32 | tf32 | bf16 | fp16: the step's precision (bf16/fp16 autocast; fp16 with loss scaling, CUDA "
                 "only); trials measure the step training will run")
      ->capture_default_str();
  app.add_option("--checkpointing", f.checkpointing,
                 allow_auto ? "activation checkpointing in the trials: none | blocks | every-N | auto (search without "
                              "and with blocks, report both curves, use checkpointing only when it wins)"
                            : "activation checkpointing in the forward pass: none | blocks | every-N")
      ->capture_default_str();
}

CheckpointPolicy step_checkpointing(const StepFlags& f) {
  if (f.allow_auto && f.checkpointing == "auto") return {};
  try {
    return parse_checkpointing(f.checkpointing);
  } catch (const UsageError&) {
    if (!f.allow_auto) throw;
    throw UsageError(fmt::format("--checkpointing: unknown value '{}' (expected none, blocks, every-N with N >= 1 "
                                 "such as every-2, or auto to compare none with blocks)",
                                 f.checkpointing));
  }
}

TrainingFootprint step_footprint(const StepFlags& f) {
  TrainingFootprint t;
  t.precision = parse_precision(f.precision);
  t.checkpointing = step_checkpointing(f);
  return t;
}

}  // namespace saturate::cli

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
  if (allow_auto) f.fast_paths = "auto";
  app.add_option("--fast-paths", f.fast_paths,
                 allow_auto ? "framework switches (seed B7): auto (try them at the found batch on CUDA, keep those "
                              "measured faster) | try (also on CPU) | none | a list to use as given: "
                              "cudnn_benchmark,tf32,channels_last,fused_optimizer,cuda_graphs,threads=N"
                            : "framework switches (seed B7): none | a list of cudnn_benchmark, tf32, channels_last, "
                              "fused_optimizer, cuda_graphs, threads=N (as `saturate search` chose them)")
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
  const bool tried = f.allow_auto && (f.fast_paths == "auto" || f.fast_paths == "try");
  if (!tried) {
    try {
      t.fast_paths = parse_fast_paths(f.fast_paths);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("--fast-paths: {}{}", e.what(), f.allow_auto ? "; or auto, or try" : ""));
    }
  }
  return t;
}

bool fast_paths_tried(const StepFlags& f, bool cuda) {
  return f.allow_auto && (f.fast_paths == "try" || (f.fast_paths == "auto" && cuda));
}


}  // namespace saturate::cli

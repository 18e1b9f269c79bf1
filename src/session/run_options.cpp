#include "saturate/session/run_options.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/output_file.h"
#include "saturate/step/fast_paths.h"

namespace saturate {
namespace {

CheckpointPolicy checkpoint_policy(const StepSettings& s) {
  if (s.compares_checkpointing()) return {};
  try {
    return parse_checkpointing(s.checkpointing);
  } catch (const UsageError&) {
    if (!s.search) throw;
    throw UsageError("checkpointing", fmt::format("unknown value '{}' (expected none, blocks, every-N with N >= 1 "
                                                  "such as every-2, or auto to compare none with blocks)",
                                                  s.checkpointing));
  }
}

}  // namespace

TrainingFootprint StepSettings::footprint() const {
  TrainingFootprint t;
  t.precision = parse_precision(precision);
  t.checkpointing = checkpoint_policy(*this);
  t.clip_grad_norm = clip_grad_norm;
  const bool tried = (search || train) && (fast_paths == "auto" || fast_paths == "try");
  if (!tried) {
    try {
      t.fast_paths = parse_fast_paths(fast_paths);
    } catch (const UsageError& e) {
      throw UsageError("fast_paths", fmt::format("{}{}", e.what(), search || train ? "; or auto, or try" : ""));
    }
  }
  if (t.fast_paths.compress_bf16 && !train)
    throw UsageError("fast_paths", "compress_bf16 all-reduces the gradients between training ranks in bf16; this "
                                   "command's steps do not all-reduce: give it to saturate train on several ranks");
  return t;
}

bool StepSettings::tries_fast_paths(bool cuda) const {
  return search && (fast_paths == "try" || (fast_paths == "auto" && cuda));
}

void StepSettings::apply_to(WorkloadSearchOptions& o) const {
  o.footprint = footprint();
  o.compare_checkpointing = compares_checkpointing();
  o.checkpointing_policy = checkpointing;
  o.fast_paths_policy = fast_paths;
  if (fast_paths == "auto")
    o.fast_paths_not_tried = "auto tries them on CUDA; try measures them on this CPU";
}

std::optional<MonitorOptions> MonitorSettings::on(const c10::Device& device) const {
  if (off) {
    if (!trace.empty()) throw UsageError("`trace` needs the monitor; drop `no_monitor`");
    return std::nullopt;
  }
  check_option_range("sample_hz", sample_hz);
  if (!trace.empty()) check_output_path(trace, {"`trace`", "trace.json"});
  MonitorOptions o;
  o.sample_hz = sample_hz;
  o.cuda = device.is_cuda();
  o.device_index = device.has_index() ? device.index() : 0;
  o.trace_path = trace;
  return o;
}

}  // namespace saturate

// Implements: the settings every workload session shares, as a user writes them (by name, as
// the command line and Python take them): the training step (`precision`, `checkpointing`,
// `fast_paths`; the search also compares checkpointing and tries the fast paths) and the monitor
// (`sample_hz`, `trace`, `no_monitor`). Each becomes the library's typed options with usage
// errors that name the option, before any device work.
#pragma once
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/workload_trial_step.h"
#include "saturate/session/workload_search.h"

namespace saturate {

struct StepSettings {
  std::string precision = "fp32";      ///< fp32 | tf32 | bf16 | fp16
  std::string checkpointing = "none";  ///< none | blocks | every-N; a search also auto
  std::string fast_paths = "none";     ///< none | a list; a search and train also auto | try
  /// A search's step: `checkpointing` auto compares none with blocks, `fast_paths` auto (on
  /// CUDA) and try time the switches at the batch found.
  bool search = false;
  /// Training's step: `fast_paths` auto or try measures the gradients' all-reduce compressed
  /// (compress_bf16) on several ranks and keeps it when faster (TrainRanksOptions).
  bool train = false;
  double clip_grad_norm = 0;  ///< train's; >= 0, 0: no clipping

  /// The step's footprint (no accumulation, no resident data); with `fast_paths` auto or try, no
  /// switches (the search tries them after finding the batch). UsageError naming the option.
  TrainingFootprint footprint() const;
  /// `checkpointing` auto: the search compares none with blocks.
  bool compares_checkpointing() const { return search && checkpointing == "auto"; }
  /// The search times the fast paths at the batch found (`fast_paths` try, or auto on CUDA).
  bool tries_fast_paths(bool cuda) const;
  /// Training measures compress_bf16 on several ranks (`fast_paths` auto or try).
  bool measures_compression() const { return train && (fast_paths == "auto" || fast_paths == "try"); }
  /// A search's options for this step: the footprint, whether it compares checkpointing, and
  /// the policies its JSON reports.
  void apply_to(WorkloadSearchOptions& search) const;
};

struct MonitorSettings {
  double sample_hz = MonitorOptions{}.sample_hz;  ///< 0..10000; 0: only at each trial's or window's edges
  std::string trace;      ///< a Chrome trace to this file ("": none)
  bool off = false;       ///< `no_monitor`
  /// The monitor's options on `device`, or nullopt when off; UsageError naming the option (a
  /// trace path that cannot be written is refused now, not after the run).
  std::optional<MonitorOptions> on(const c10::Device& device) const;
};

}  // namespace saturate

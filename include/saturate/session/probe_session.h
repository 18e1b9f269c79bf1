// Implements: `saturate probe` as one library call: warm-up and timed training steps at one
// batch on an opened workload, with the memory breakdown, the monitor's phases and verdict, the
// loader feeding it when data is given, and the last step's memory timeline. An out-of-memory is
// a measured result, not a throw; options are checked once, naming the option.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/memory/timeline.h"
#include "saturate/probe/probe.h"
#include "saturate/session/data_session.h"
#include "saturate/session/run_options.h"
#include "saturate/session/workload_session.h"

namespace saturate {

struct ProbeSessionOptions {
  int64_t batch = 0;        ///< samples per step, 1..2^31-1
  int warmup_steps = 1;     ///< untimed steps first, 0..1e6
  int measure_steps = 5;    ///< timed steps (the median is reported), 1..1e6
  StepSettings step;
  MonitorSettings monitor;
  DataOptions data;         ///< opened by open_data (OpenedData)
  bool empty_cache = false; ///< empty the allocator's cache before the trial and report its cost
  bool timeline = false;    ///< keep the last step's memory timeline
  void check() const;
};

struct ProbeSessionResult {
  Trial trial;
  std::optional<DataSource> data;  ///< the data the trial read, when given
  std::optional<Timeline> timeline;
  std::vector<std::string> warnings;  ///< no NVML on a CUDA run, ...
  nlohmann::json to_json(const RunContext& context) const;
  /// The trial, the bottleneck and the data lines, for people.
  std::string to_text(const RunContext& context) const;
};

ProbeSessionResult run_probe_session(WorkloadSession& session, const OpenedData& data,
                                     const ProbeSessionOptions& options, const DataEvents& events = {});

}  // namespace saturate

// Implements: the device sampler. A background thread reads the device at a fixed rate
// (`--sample-hz`, default 10): GPU utilization, memory used/total, power, SM clock,
// temperature and the watched processes' GPU memory through NVML; the watched processes' CPU
// utilization and resident memory from /proc always (the only source without NVML).
// Summaries (mean/min/max of each value over a time window) go into a trial's JSON as
// `utilization`; the CSV log's header and rows (the live line for people: report/monitor_text.h).
// No LibTorch here.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/probe/findings.h"
#include "saturate/monitor/nvml.h"

namespace saturate {

using SteadyClock = std::chrono::steady_clock;

/// One reading. Values a source cannot give are NaN.
struct Sample {
  SteadyClock::time_point at;
  double time_s = 0;            ///< seconds since the sampler started
  double cpu_percent = 0;       ///< since the previous sample; 100 = one core busy (as top)
  double cpu_time_s = 0;        ///< cumulative CPU time of the watched processes
  double rss_bytes = 0;
  double gpu_util_percent = 0, mem_util_percent = 0, mem_used_bytes = 0, mem_total_bytes = 0, power_w = 0,
         sm_clock_mhz = 0, temperature_c = 0, process_gpu_mem_bytes = 0;
};

/// The sampled values by name, in output order; `nvml` ones are NaN under the proc source.
struct SampleField {
  const char* name;
  double Sample::*member;
  bool nvml;
};
const std::vector<SampleField>& sample_fields();

struct SamplerOptions {
  /// Samples per second; 0 samples only when asked (sample_now), never in the background.
  double sample_hz = 10;
  /// The process whose CPU, memory and GPU memory are watched (0: this process).
  int pid = 0;
  /// Add the watched process's descendants (saturate monitor runs commands through them).
  bool include_descendants = false;
  /// Read GPU `gpu_index` through NVML when it loads; false: /proc only.
  bool use_nvml = true;
  int gpu_index = 0;
  /// NVML library to load ("" : $SATURATE_NVML_LIBRARY or libnvidia-ml.so.1).
  std::string nvml_path;
  /// Called on the sampling thread with each new sample (e.g. to append a CSV row).
  std::function<void(const Sample&)> on_sample;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options);
  ~Sampler();  ///< stops the thread
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// "nvml" when NVML loaded, else "proc".
  const std::string& source() const { return source_; }
  /// Why NVML is not used (empty when it is, or was not asked for).
  const std::string& nvml_note() const { return nvml_note_; }
  /// The GPU's name when NVML is used.
  const std::string& gpu_name() const { return gpu_name_; }
  double sample_hz() const { return options_.sample_hz; }

  /// Starts the background thread (no-op at 0 Hz or when running).
  void start();
  /// Stops and joins it; samples stay available.
  void stop();
  /// Takes one sample now, on the caller's thread (window edges, tests).
  Sample sample_now();
  /// Every sample so far, oldest first.
  std::vector<Sample> samples() const;
  /// The samples taken at or after `from`, oldest first (a window's, without copying the rest).
  std::vector<Sample> samples_since(SteadyClock::time_point from) const;
  /// Forgets the samples taken before `before` (a long run that writes no trace).
  void discard_before(SteadyClock::time_point before);
  /// The newest sample; false when there is none.
  bool latest(Sample* out) const;
  /// CPU time the sampling itself has cost, in seconds (its own overhead).
  double own_cpu_s() const;

 private:
  Sample read();
  void loop();
  SamplerOptions options_;
  std::shared_ptr<Nvml> nvml_;
  std::string source_ = "proc", nvml_note_, gpu_name_;
  SteadyClock::time_point origin_;
  mutable std::mutex mu_;
  std::mutex read_mu_;  // one reading at a time (the thread and sample_now)
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::vector<Sample> samples_;
  bool have_prev_ = false;
  double prev_cpu_s_ = 0;
  SteadyClock::time_point prev_at_;
  double own_cpu_s_ = 0;
};

/// mean/min/max of each value over the samples taken in [from, to], as the trial JSON's
/// `utilization`: {"source", "samples", "sample_hz", "<value>": {"mean","min","max"}, ...}.
/// The mean of cpu_percent is exact (CPU time over wall time between the first and last
/// sample), min/max are per sampling interval.
Utilization summarize_utilization(const std::vector<Sample>& samples, const std::string& source, double sample_hz,
                                  SteadyClock::time_point from, SteadyClock::time_point to);
/// The same as JSON (to_json of the above).
nlohmann::json summarize_samples(const std::vector<Sample>& samples, const std::string& source, double sample_hz,
                                 SteadyClock::time_point from, SteadyClock::time_point to);
/// Over every sample.
nlohmann::json summarize_samples(const std::vector<Sample>& samples, const std::string& source, double sample_hz);

/// The CSV log: a header naming every field, then one row per sample (NaN as empty).
std::string csv_header();
std::string csv_row(const Sample& s, const std::string& source);

}  // namespace saturate

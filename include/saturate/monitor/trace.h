// Implements: a Chrome trace (the JSON format chrome://tracing and Perfetto load) of a run:
// trials, steps and step phases as complete ("X") events on one track per thread, sampled
// device values as counter ("C") tracks. Thread-safe; written once at the end. No LibTorch.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace saturate {

struct Sample;

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;
  TraceWriter();

  /// A complete event on the calling thread's track, [begin, end].
  void complete(const std::string& name, const std::string& category, Clock::time_point begin, Clock::time_point end,
                nlohmann::json args = nlohmann::json::object());
  /// One value of the counter track `name` at `at`.
  void counter(const std::string& name, Clock::time_point at, double value);
  /// Every sampled value as counter tracks (NaN values are left out).
  void add_samples(const std::vector<Sample>& samples);
  /// Names the calling thread's track (default: "main" for the first thread seen, else "thread N").
  void name_thread(const std::string& name);

  /// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}; timestamps in µs.
  nlohmann::json to_json() const;
  /// Writes to_json() to `path` (write_output_file: atomic for a regular file, a FIFO or device in
  /// place); throws RuntimeFailure naming the path when it cannot.
  void write(const std::string& path) const;
  size_t event_count() const;

 private:
  int tid_locked();
  double us(Clock::time_point t) const;
  Clock::time_point origin_;
  int pid_;
  mutable std::mutex mu_;
  std::unordered_map<std::thread::id, int> tids_;
  std::vector<std::pair<int, std::string>> thread_names_;
  std::vector<nlohmann::json> events_;
};

}  // namespace saturate

#include "saturate/monitor/trace.h"

#include <unistd.h>

#include <cmath>

#include "saturate/core/output_file.h"
#include "saturate/monitor/sampler.h"

namespace saturate {

TraceWriter::TraceWriter() : origin_(Clock::now()), pid_(static_cast<int>(getpid())) {}

double TraceWriter::us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

int TraceWriter::tid_locked() {
  const auto id = std::this_thread::get_id();
  auto it = tids_.find(id);
  if (it != tids_.end()) return it->second;
  const int tid = static_cast<int>(tids_.size()) + 1;
  tids_.emplace(id, tid);
  thread_names_.emplace_back(tid, tid == 1 ? "main" : "thread " + std::to_string(tid));
  return tid;
}

void TraceWriter::name_thread(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const int tid = tid_locked();
  for (auto& [t, n] : thread_names_)
    if (t == tid) n = name;
}

void TraceWriter::complete(const std::string& name, const std::string& category, Clock::time_point begin,
                           Clock::time_point end, nlohmann::json args) {
  if (end < begin) end = begin;
  std::lock_guard<std::mutex> lock(mu_);
  const int tid = tid_locked();
  // ts and dur from the same rounded edges, so that nested events stay nested in the file.
  const double ts = std::round(us(begin) * 1000.0) / 1000.0;
  const double te = std::round(us(end) * 1000.0) / 1000.0;
  nlohmann::json e = {{"name", name}, {"cat", category}, {"ph", "X"}, {"ts", ts},
                      {"dur", te - ts},  {"pid", pid_},     {"tid", tid}};
  if (!args.empty()) e["args"] = std::move(args);
  events_.push_back(std::move(e));
}

void TraceWriter::counter(const std::string& name, Clock::time_point at, double value) {
  if (std::isnan(value)) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({{"name", name}, {"cat", "device"}, {"ph", "C"}, {"ts", us(at)}, {"pid", pid_}, {"tid", 0},
                     {"args", {{name, value}}}});
}

void TraceWriter::add_samples(const std::vector<Sample>& samples) {
  for (const Sample& s : samples)
    for (const SampleField& f : sample_fields()) counter(f.name, s.at, s.*f.member);
}

nlohmann::json TraceWriter::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0}, {"args", {{"name", "saturate"}}}});
  for (const auto& [tid, name] : thread_names_)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", tid}, {"args", {{"name", name}}}});
  for (const auto& e : events_) events.push_back(e);
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"producer", "saturate"}}}};
}

void TraceWriter::write(const std::string& path) const {
  write_output_file(path, to_json().dump() + "\n", {"`trace`", "trace.json"});
}

size_t TraceWriter::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

}  // namespace saturate

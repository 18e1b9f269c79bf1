#include "saturate/monitor/sampler.h"

#include <nlohmann/json.hpp>
#include "monitor/readings.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "saturate/monitor/proc_stats.h"

namespace saturate {
namespace {


double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

const std::vector<SampleField>& sample_fields() {
  static const std::vector<SampleField> fields = {
      {"gpu_util_percent", &Sample::gpu_util_percent, true},
      {"mem_util_percent", &Sample::mem_util_percent, true},
      {"mem_used_bytes", &Sample::mem_used_bytes, true},
      {"mem_total_bytes", &Sample::mem_total_bytes, true},
      {"power_w", &Sample::power_w, true},
      {"sm_clock_mhz", &Sample::sm_clock_mhz, true},
      {"temperature_c", &Sample::temperature_c, true},
      {"process_gpu_mem_bytes", &Sample::process_gpu_mem_bytes, true},
      {"cpu_percent", &Sample::cpu_percent, false},
      {"rss_bytes", &Sample::rss_bytes, false},
  };
  return fields;
}

Sampler::Sampler(SamplerOptions options) : options_(std::move(options)), origin_(SteadyClock::now()) {
  if (options_.pid <= 0) options_.pid = static_cast<int>(getpid());
  if (options_.sample_hz < 0) options_.sample_hz = 0;
  if (options_.use_nvml) {
    nvml_ = Nvml::load(options_.nvml_path, &nvml_note_);
    if (nvml_ && options_.gpu_index >= nvml_->device_count()) {
      nvml_note_ = fmt::format("NVML unavailable: it lists {} GPU(s), no GPU {}", nvml_->device_count(),
                               options_.gpu_index);
      nvml_.reset();
    }
    if (nvml_) {
      source_ = "nvml";
      gpu_name_ = nvml_->device_name(options_.gpu_index);
    }
  }
}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  if (options_.sample_hz <= 0 || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { loop(); });
}

void Sampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::loop() {
  const auto period = std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(1.0 / options_.sample_hz));
  auto next = SteadyClock::now();
  for (;;) {
    sample_now();
    next += period;
    const auto now = SteadyClock::now();
    if (next < now) next = now + period;  // fell behind (a suspended process): skip, don't burst
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
  }
}

Sample Sampler::sample_now() {
  std::lock_guard<std::mutex> reading(read_mu_);
  const double cpu0 = thread_cpu_s();
  Sample s = read();
  const double cost = thread_cpu_s() - cpu0;
  std::lock_guard<std::mutex> lock(mu_);
  own_cpu_s_ += cost;
  samples_.push_back(s);
  if (options_.on_sample) options_.on_sample(s);
  return s;
}

Sample Sampler::read() {
  Sample s;
  s.at = SteadyClock::now();
  s.time_s = std::chrono::duration<double>(s.at - origin_).count();
  const ProcUsage u = read_proc_usage(options_.pid, options_.include_descendants);
  s.cpu_time_s = u.cpu_time_s;
  // a process that has ended (a zombie waiting to be reaped) holds no memory worth a minimum; one
  // in the middle of its exit has already let its address space go and reads 0 resident pages
  // while not yet a zombie (seen: cli.monitor_log's last live row read 0): no reading either, a
  // running process always has pages resident
  s.rss_bytes = u.alive && u.rss_bytes > 0 ? static_cast<double>(u.rss_bytes) : monitor_detail::kNoReading;
  if (have_prev_) {
    const double wall = std::chrono::duration<double>(s.at - prev_at_).count();
    s.cpu_percent = wall > 0 ? std::max(0.0, 100.0 * (u.cpu_time_s - prev_cpu_s_) / wall) : monitor_detail::kNoReading;
  } else {
    s.cpu_percent = monitor_detail::kNoReading;  // no interval yet
  }
  have_prev_ = true;
  prev_cpu_s_ = u.cpu_time_s;
  prev_at_ = s.at;
  s.gpu_util_percent = s.mem_util_percent = s.mem_used_bytes = s.mem_total_bytes = s.power_w = s.sm_clock_mhz =
      s.temperature_c = s.process_gpu_mem_bytes = monitor_detail::kNoReading;
  if (nvml_) {
    const std::vector<int> pids =
        options_.include_descendants ? process_tree(options_.pid) : std::vector<int>{options_.pid};
    const NvmlReading r = nvml_->read(options_.gpu_index, pids);
    s.gpu_util_percent = r.gpu_util_percent;
    s.mem_util_percent = r.mem_util_percent;
    s.mem_used_bytes = r.mem_used_bytes;
    s.mem_total_bytes = r.mem_total_bytes;
    s.power_w = r.power_w;
    s.sm_clock_mhz = r.sm_clock_mhz;
    s.temperature_c = r.temperature_c;
    s.process_gpu_mem_bytes = r.process_gpu_mem_bytes;
  }
  return s;
}

std::vector<Sample> Sampler::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

std::vector<Sample> Sampler::samples_since(SteadyClock::time_point from) const {
  std::lock_guard<std::mutex> lock(mu_);
  // samples are appended in time order (one reading at a time)
  const auto first = std::lower_bound(samples_.begin(), samples_.end(), from,
                                      [](const Sample& s, SteadyClock::time_point t) { return s.at < t; });
  return {first, samples_.end()};
}

void Sampler::discard_before(SteadyClock::time_point before) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto first = std::lower_bound(samples_.begin(), samples_.end(), before,
                                      [](const Sample& s, SteadyClock::time_point t) { return s.at < t; });
  samples_.erase(samples_.begin(), first);
}

bool Sampler::latest(Sample* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_.empty()) return false;
  *out = samples_.back();
  return true;
}

double Sampler::own_cpu_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return own_cpu_s_;
}

Utilization summarize_utilization(const std::vector<Sample>& samples, const std::string& source, double sample_hz,
                                  SteadyClock::time_point from, SteadyClock::time_point to) {
  std::vector<const Sample*> in;
  for (const Sample& s : samples)
    if (s.at >= from && s.at <= to) in.push_back(&s);
  Utilization u;
  u.source = source;
  u.samples = static_cast<int64_t>(in.size());
  u.sample_hz = sample_hz;
  for (const SampleField& f : sample_fields()) {
    double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
    int n = 0;
    for (const Sample* s : in) {
      const double v = s->*f.member;
      if (std::isnan(v)) continue;
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      ++n;
    }
    if (n == 0) continue;
    double mean = sum / n;
    if (f.member == &Sample::cpu_percent && in.size() >= 2) {
      const double wall = std::chrono::duration<double>(in.back()->at - in.front()->at).count();
      if (wall > 0) mean = 100.0 * (in.back()->cpu_time_s - in.front()->cpu_time_s) / wall;
    }
    u.fields.push_back({f.name, UtilizationStat{mean, lo, hi}});
  }
  return u;
}

nlohmann::json summarize_samples(const std::vector<Sample>& samples, const std::string& source, double sample_hz,
                                 SteadyClock::time_point from, SteadyClock::time_point to) {
  return to_json(summarize_utilization(samples, source, sample_hz, from, to));
}

nlohmann::json summarize_samples(const std::vector<Sample>& samples, const std::string& source, double sample_hz) {
  return summarize_samples(samples, source, sample_hz, SteadyClock::time_point::min(), SteadyClock::time_point::max());
}

std::string csv_header() {
  std::string h = "time_s,source";
  for (const SampleField& f : sample_fields()) h += std::string(",") + f.name;
  return h;
}

std::string csv_row(const Sample& s, const std::string& source) {
  std::string row = fmt::format("{:.3f},{}", s.time_s, source);
  for (const SampleField& f : sample_fields()) {
    const double v = s.*f.member;
    row += std::isnan(v) ? std::string(",") : fmt::format(",{}", v);
  }
  return row;
}

}  // namespace saturate

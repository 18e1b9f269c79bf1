#include "saturate/monitor/op_profile.h"

#include <nlohmann/json.hpp>
#include "monitor/readings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <unordered_map>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Span {
  uint64_t begin_ns, end_ns;
  std::string name;
};

}  // namespace

OpProfile::~OpProfile() {
  if (!running_) return;
  try {
    prof::disableProfiler();
  } catch (...) {
  }
}

void OpProfile::start() {
  if (running_) return;
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                    /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false,
                                    /*with_modules=*/false);
  const std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  try {
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    throw RuntimeFailure(std::string("the operator profile could not start LibTorch's profiler: ") + e.what());
  }
  running_ = true;
  started_ns_ = now_ns();
}

OpTable OpProfile::stop() {
  OpTable t;
  if (!running_) return t;
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  running_ = false;
  t.wall_ms = static_cast<double>(now_ns() - started_ns_) / 1e6;
  // per thread, the spans sorted by begin (longer first on a tie): a stack gives each span's
  // parent, whose self time loses the child's span.
  std::unordered_map<uint64_t, std::vector<Span>> by_thread;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CPU) continue;
    const uint64_t begin = e.startNs();
    by_thread[e.startThreadId()].push_back({begin, begin + e.durationNs(), e.name()});
  }
  std::map<std::string, OpRow> rows;
  for (auto& [thread, spans] : by_thread) {
    ++t.threads;
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
    });
    std::vector<std::pair<const Span*, double>> stack;  // span, its children's time so far
    const auto close = [&](const Span* s, double children_ms) {
      OpRow& r = rows[s->name];
      r.name = s->name;
      ++r.calls;
      const double span_ms = static_cast<double>(s->end_ns - s->begin_ns) / 1e6;
      r.total_ms += span_ms;
      r.self_ms += std::max(0.0, span_ms - children_ms);
      return span_ms;
    };
    for (const Span& s : spans) {
      while (!stack.empty() && stack.back().first->end_ns <= s.begin_ns) {
        const double span_ms = close(stack.back().first, stack.back().second);
        stack.pop_back();
        if (!stack.empty()) stack.back().second += span_ms;
      }
      stack.push_back({&s, 0.0});
    }
    while (!stack.empty()) {
      const double span_ms = close(stack.back().first, stack.back().second);
      stack.pop_back();
      if (!stack.empty()) stack.back().second += span_ms;
    }
  }
  for (auto& [name, row] : rows) {
    t.self_ms_total += row.self_ms;
    t.rows.push_back(std::move(row));
  }
  std::sort(t.rows.begin(), t.rows.end(), [](const OpRow& a, const OpRow& b) { return a.self_ms > b.self_ms; });
  return t;
}

nlohmann::json op_table_json(const OpTable& t, int64_t steps) {
  const double per = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  nlohmann::json ops = nlohmann::json::array();
  for (const OpRow& r : t.rows) {
    nlohmann::json row = {{"name", r.name}, {"calls", r.calls}, {"self_ms", monitor_detail::round3(r.self_ms)}, {"total_ms", monitor_detail::round3(r.total_ms)}};
    if (steps > 0) {
      row["calls_per_step"] = monitor_detail::round3(static_cast<double>(r.calls) * per);
      row["self_ms_per_step"] = monitor_detail::round3(r.self_ms * per);
    }
    ops.push_back(std::move(row));
  }
  nlohmann::json j = {{"wall_ms", monitor_detail::round3(t.wall_ms)}, {"self_ms_total", monitor_detail::round3(t.self_ms_total)}, {"threads", t.threads},
                      {"ops", std::move(ops)}};
  if (steps > 0) {
    j["steps"] = steps;
    j["wall_ms_per_step"] = monitor_detail::round3(t.wall_ms * per);
    j["self_ms_total_per_step"] = monitor_detail::round3(t.self_ms_total * per);
  }
  return j;
}

}  // namespace saturate

#include "saturate/memory/recorder.h"

#include <algorithm>
#include <chrono>

#include "memory/cuda_recorder.h"
#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"

namespace saturate {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuRecorder final : public AllocationRecorder {
 public:
  void start() override {
    start_cpu_event_log();
    log_ = MemoryEventLog{};
    log_.start_time_ns = steady_ns();
    active_ = true;
  }
  void mark(int step, const std::string& phase, bool begin, bool measured) override {
    if (!active_) return;
    log_.marks.push_back({cpu_event_log_size(), steady_ns(), step, phase, begin, measured});
  }
  MemoryEventLog stop() override {
    if (!active_) return {};
    active_ = false;
    CpuEventLog raw = stop_cpu_event_log();
    log_.start_allocated_bytes = raw.start_allocated_bytes;
    log_.truncated = raw.truncated;
    log_.source = "cpu allocator event log";
    log_.events.reserve(raw.events.size());
    for (const CpuAllocationEvent& e : raw.events) {
      const MemoryEvent::Kind kind = e.kind == CpuAllocationEvent::kAlloc  ? MemoryEvent::kAlloc
                                     : e.kind == CpuAllocationEvent::kFree ? MemoryEvent::kFree
                                                                           : MemoryEvent::kOom;
      log_.events.push_back({kind, e.bytes, static_cast<uint64_t>(e.address), e.time_ns});
    }
    // a mark set after the last event points past it.
    for (PhaseMark& m : log_.marks) m.event_index = std::min(m.event_index, log_.events.size());
    return std::move(log_);
  }
  bool active() const override { return active_; }

 private:
  MemoryEventLog log_;
  bool active_ = false;
};

}  // namespace

std::unique_ptr<AllocationRecorder> make_allocation_recorder(const c10::Device& device) {
  if (device.is_cpu()) {
    install_cpu_budget_allocator();
    return std::make_unique<CpuRecorder>();
  }
  if (device.is_cuda()) return make_cuda_allocation_recorder(device.has_index() ? device.index() : 0);
  throw UsageError("memory recorder: unsupported device '" + device.str() + "' (expected cpu or cuda)");
}

#ifndef SATURATE_WITH_CUDA
std::unique_ptr<AllocationRecorder> make_cuda_allocation_recorder(c10::DeviceIndex) {
  throw RuntimeFailure("this saturate was built against a LibTorch without CUDA; use `device` cpu");
}
#endif

}  // namespace saturate

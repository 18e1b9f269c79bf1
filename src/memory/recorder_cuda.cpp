// CUDA allocation recorder: the caching allocator's history, with phase marks carried as user
// metadata ("saturate:<mark number>") on each trace entry.
#include <algorithm>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/ApproximateClock.h>

#include "memory/cuda_recorder.h"

namespace saturate {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;
using Trace = c10::CachingDeviceAllocator::TraceEntry;

constexpr size_t kMaxEntries = size_t{1} << 22;
const std::string kTag = "saturate:";

class CudaRecorder final : public AllocationRecorder {
 public:
  explicit CudaRecorder(c10::DeviceIndex index) : index_(index) {}
  void start() override {
    log_ = MemoryEventLog{};
    log_.start_time_ns = c10::getTime();
    log_.start_allocated_bytes = alloc::getDeviceStats(index_).allocated_bytes[0].current;
    alloc::recordHistory(true, nullptr, kMaxEntries, alloc::RecordContext::STATE, /*clearHistory=*/true, {});
    alloc::setUserMetadata(kTag + "0");
    active_ = true;
  }
  void mark(int step, const std::string& phase, bool begin, bool measured) override {
    if (!active_) return;
    log_.marks.push_back({0, c10::getTime(), step, phase, begin, measured});
    // entries made after this mark carry its number.
    alloc::setUserMetadata(kTag + std::to_string(log_.marks.size()));
  }
  MemoryEventLog stop() override {
    if (!active_) return {};
    active_ = false;
    const alloc::SnapshotInfo snap = alloc::snapshot();
    alloc::setUserMetadata("");
    alloc::recordHistory(false, nullptr, 0, alloc::RecordContext::NEVER, /*clearHistory=*/true, {});
    log_.source = "cuda caching allocator history";
    // event_index of mark k: the first event carrying a number >= k + 1.
    std::vector<size_t> first_with(log_.marks.size() + 2, SIZE_MAX);
    if (static_cast<size_t>(index_) < snap.device_traces.size()) {
      for (const Trace& te : snap.device_traces[static_cast<size_t>(index_)]) {
        MemoryEvent e;
        if (te.action_ == Trace::ALLOC) e.kind = MemoryEvent::kAlloc;
        else if (te.action_ == Trace::FREE_REQUESTED) e.kind = MemoryEvent::kFree;
        else if (te.action_ == Trace::OOM) e.kind = MemoryEvent::kOom;
        else continue;
        e.bytes = static_cast<int64_t>(te.size_);
        e.address = e.kind == MemoryEvent::kOom ? 0 : static_cast<uint64_t>(te.addr_);
        e.time_ns = static_cast<int64_t>(te.time_.t_);
        size_t number = 0;
        if (te.user_metadata_.rfind(kTag, 0) == 0) number = std::stoul(te.user_metadata_.substr(kTag.size()));
        number = std::min(number, log_.marks.size());
        if (first_with[number] == SIZE_MAX) first_with[number] = log_.events.size();
        log_.events.push_back(e);
      }
    }
    size_t next = log_.events.size();
    for (size_t k = log_.marks.size(); k-- > 0;) {
      if (first_with[k + 1] != SIZE_MAX) next = std::min(next, first_with[k + 1]);
      log_.marks[k].event_index = next;
    }
    return std::move(log_);
  }
  bool active() const override { return active_; }

 private:
  c10::DeviceIndex index_;
  MemoryEventLog log_;
  bool active_ = false;
};

}  // namespace

std::unique_ptr<AllocationRecorder> make_cuda_allocation_recorder(c10::DeviceIndex index) {
  return std::make_unique<CudaRecorder>(index);
}

}  // namespace saturate

// CUDA phase clock: timing events (cudaEventDefault: the default disables no timing) recorded
// on the current stream; a pool reused across steps so that steady-state steps create none.
#include <deque>

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include "saturate/monitor/phase_clock.h"

namespace saturate {
namespace {

class CudaPhaseClock final : public PhaseClock {
 public:
  explicit CudaPhaseClock(int device_index) : index_(static_cast<c10::DeviceIndex>(device_index)) {}
  int mark(std::chrono::steady_clock::time_point) override {
    if (used_ == events_.size()) events_.emplace_back(cudaEventDefault);
    events_[used_].record(c10::cuda::getCurrentCUDAStream(index_));
    return static_cast<int>(used_++);
  }
  double elapsed_ms(int from, int to) override {
    return static_cast<double>(events_.at(static_cast<size_t>(from)).elapsed_time(events_.at(static_cast<size_t>(to))));
  }
  void clear() override { used_ = 0; }
  const char* name() const override { return "cuda-events"; }

 private:
  c10::DeviceIndex index_;
  std::deque<c10::cuda::CUDAEvent> events_;  // a deque: events do not move once made
  size_t used_ = 0;
};

}  // namespace

std::unique_ptr<PhaseClock> make_cuda_phase_clock(int device_index) {
  return std::make_unique<CudaPhaseClock>(device_index);
}

}  // namespace saturate

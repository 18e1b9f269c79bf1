#include "saturate/monitor/phase_clock.h"

#include <chrono>
#include <vector>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

class HostPhaseClock final : public PhaseClock {
 public:
  int mark(std::chrono::steady_clock::time_point host_now) override {
    marks_.push_back(host_now);
    return static_cast<int>(marks_.size()) - 1;
  }
  double elapsed_ms(int from, int to) override {
    return std::chrono::duration<double, std::milli>(marks_.at(to) - marks_.at(from)).count();
  }
  void clear() override { marks_.clear(); }
  const char* name() const override { return "host"; }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<PhaseClock> make_host_phase_clock() { return std::make_unique<HostPhaseClock>(); }

#ifndef SATURATE_WITH_CUDA
std::unique_ptr<PhaseClock> make_cuda_phase_clock(int) {
  throw RuntimeFailure("CUDA phase timing: this saturate was built without CUDA; rebuild against a CUDA LibTorch");
}
#endif

}  // namespace saturate

// Implements: the clocks that time step phases. On CPU a host clock: LibTorch's CPU ops run
// synchronously on the calling thread, so the host time between two marks is the work's time.
// On CUDA, events recorded on the current stream (phase_clock_cuda.cpp): the device's own
// time between two marks, read after the step synchronized. No LibTorch in this header.
#pragma once
#include <chrono>
#include <memory>

namespace saturate {

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  /// Records a point now (on the device's timeline for CUDA); `host_now` is the caller's
  /// steady-clock reading of now, which the host clock keeps (one clock read, not two).
  virtual int mark(std::chrono::steady_clock::time_point host_now) = 0;
  /// Milliseconds from mark `from` to mark `to`; on CUDA only after the device synchronized.
  virtual double elapsed_ms(int from, int to) = 0;
  /// Forgets the marks (their storage is reused).
  virtual void clear() = 0;
  /// "host" or "cuda-events".
  virtual const char* name() const = 0;
};

std::unique_ptr<PhaseClock> make_host_phase_clock();
/// CUDA events on device `device_index`; throws RuntimeFailure in a build without CUDA.
std::unique_ptr<PhaseClock> make_cuda_phase_clock(int device_index);

}  // namespace saturate

// Implements: recording a run's allocations with phase marks, whatever the device.
//  - CPU: the byte-counting allocator's event log (cpu_budget_allocator.h).
//  - CUDA: the caching allocator's history (recordHistory + snapshot); phase marks travel as
//    the allocator's user metadata, so each trace entry says which phase made it.
#pragma once
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "saturate/memory/events.h"

namespace saturate {

class AllocationRecorder {
 public:
  virtual ~AllocationRecorder() = default;
  /// Starts a fresh log (drops an unfinished one).
  virtual void start() = 0;
  /// Marks the begin or end of a phase ("step", "inputs", "forward", ...) at this point of the log.
  virtual void mark(int step, const std::string& phase, bool begin, bool measured = true) = 0;
  /// Stops and hands the log over.
  virtual MemoryEventLog stop() = 0;
  virtual bool active() const = 0;
};

/// The recorder for `device` (cpu or cuda); throws RuntimeFailure for a CUDA device in a build
/// without CUDA.
std::unique_ptr<AllocationRecorder> make_allocation_recorder(const c10::Device& device);

}  // namespace saturate

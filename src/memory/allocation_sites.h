// Implements: naming the code that made each CPU allocation. While an AllocationSiteTracking
// lives, a LibTorch RecordFunction callback follows the operators every thread runs and tells
// the CPU allocator's event log (core/cpu_budget_allocator.h) which one is allocating, as
// "outermost > innermost": "aten::linear > aten::addmm", "backward: AddmmBackward0 > aten::mm".
// Factory ops (aten::empty*) are skipped for the inner name, since they allocate for their caller.
// It costs about a microsecond per operator, so it runs only for a few diagnostic steps.
#pragma once
#include <cstdint>

namespace saturate {

class AllocationSiteTracking {
 public:
  AllocationSiteTracking();
  ~AllocationSiteTracking();
  AllocationSiteTracking(const AllocationSiteTracking&) = delete;
  AllocationSiteTracking& operator=(const AllocationSiteTracking&) = delete;

 private:
  uint64_t handle_ = 0;
};

}  // namespace saturate

#include "saturate/step/phase_observer.h"

#include <exception>

#include "saturate/core/errors.h"

namespace saturate {
namespace {
thread_local PhaseObserver* current_observer = nullptr;
}  // namespace

PhaseScope::PhaseScope(Phase phase) : observer_(current_observer), phase_(phase) {
  if (observer_) observer_->phase_begin(phase_);
}

PhaseScope::~PhaseScope() {
  // an exception (an OOM) leaves the phase open, as a failed built-in step does
  if (observer_ && std::uncaught_exceptions() == 0) observer_->phase_end(phase_);
}

PhaseObserver* current_phase_observer() { return current_observer; }

PhaseObserverInstall::PhaseObserverInstall(PhaseObserver* observer) : saved_(current_observer) {
  current_observer = observer;
}

PhaseObserverInstall::~PhaseObserverInstall() { current_observer = saved_; }

std::string to_string(Phase p) {
  switch (p) {
    case Phase::kDataWait: return "data_wait";
    case Phase::kHostToDevice: return "h2d";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kAllreduce: return "allreduce";
  }
  return "forward";
}

Phase parse_phase(const std::string& name) {
  for (Phase p : {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward, Phase::kBackward, Phase::kOptimizer,
                  Phase::kAllreduce})
    if (to_string(p) == name) return p;
  throw UsageError("phase", "unknown phase '" + name +
                                "': use one of data_wait, h2d, forward, backward, optimizer, allreduce");
}

}  // namespace saturate

#include "saturate/step/phase_observer.h"

namespace saturate {

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

}  // namespace saturate

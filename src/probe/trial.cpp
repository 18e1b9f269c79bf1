#include "saturate/probe/trial.h"

namespace saturate {

std::string to_string(TrialStatus s) {
  switch (s) {
    case TrialStatus::kOk: return "ok";
    case TrialStatus::kOom: return "oom";
    case TrialStatus::kOverTarget: return "over-target";
    case TrialStatus::kError: return "error";
  }
  return "error";
}

}  // namespace saturate

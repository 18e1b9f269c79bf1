#include "saturate/probe/trial.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

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

TrialStatus parse_trial_status(const std::string& text) {
  for (TrialStatus s : {TrialStatus::kOk, TrialStatus::kOom, TrialStatus::kOverTarget, TrialStatus::kError})
    if (to_string(s) == text) return s;
  throw UsageError(fmt::format("trial status '{}': expected ok, oom, over-target or error (as a search's JSON writes it)",
                               text));
}

}  // namespace saturate

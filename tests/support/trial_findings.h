// A trial's findings as the JSON the trial carries in a report (the keys of the JSON contract),
// for tests that read them by key.
#pragma once
#include <nlohmann/json.hpp>

#include "saturate/probe/trial.h"

namespace saturate::testing {

inline nlohmann::json findings_json(const Trial& t) {
  nlohmann::json j = nlohmann::json::object();
  add_findings_json(t.findings, j);
  return j;
}

}  // namespace saturate::testing

// Implements: one answer per run (issue 27). A search measures several batches that could be
// "best" — the largest under the target (memory), the knee of the samples/s curve
// (throughput), goodput's — and the fastest of the memory probes; a report that prints them side
// by side leaves the user to guess. The decision is the batch to train at, the objective that
// chose it, the reason in one line, and the others by name as alternatives. No batch above the
// memory-safe one (the recommended batch, whose measured peak stays within the target) is ever
// the decision or an alternative: the max_batch is the limit, not a choice. Console, JSON, HTML
// and Python lead with it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/search/objective.h"
#include "saturate/search/search.h"

namespace saturate {

/// A batch the run could train at instead, named by what chose it.
struct BatchAlternative {
  /// "memory" (the recommended batch), "throughput" (the curve's knee), "goodput", or
  /// "fastest_probe" (the smallest memory probe within 3 % of the fastest probe's samples/s).
  std::string name;
  int64_t batch = 0;
  std::string reason;  ///< one line
};

struct BatchDecision {
  int64_t batch = 0;  ///< the batch to train at; 0: none (no batch fits within the target)
  Objective objective = Objective::kMemory;  ///< what chose it (after any fallback)
  Objective requested = Objective::kMemory;  ///< what was asked for
  std::string reason;                        ///< why this batch, in one line
  std::string fallback;                      ///< why the requested objective did not choose ("")
  std::vector<BatchAlternative> alternatives;  ///< every other candidate, none above the memory-safe batch
};

/// The batch to train at from a search and, when an objective other than memory ran, its
/// outcome (nullptr: memory). The objective's batch is capped at the memory-safe batch.
BatchDecision decide_batch(const SearchResult& search, const ObjectiveOutcome* objective = nullptr);

/// The search JSON's "decision": {batch, objective, requested, reason, fallback?, alternatives:
/// [{name, batch, reason}]}.
nlohmann::json to_json(const BatchDecision& d);
/// The decision read back from a saved run's "decision" (what to_json wrote; a key left out keeps
/// its default). UsageError naming `path`.key for a value of the wrong type or an objective
/// saturate does not know.
BatchDecision decision_from_json(const nlohmann::json& j, const std::string& path = "decision");

/// For people, one line: "train at batch 572 (objective goodput): <reason>", or why there is none.
std::string decision_line(const BatchDecision& d);

}  // namespace saturate

// Implements: the library's typed results as Python objects (issue 46): a search's trials, its
// answer, its decision and objective are pybind11 classes read field by field, not JSON strings
// the package parses again. The JSON printer's output travels beside them as a Python dict (the
// `data` of the package's results, what `--json` writes), converted in C++ without a string.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>

#include "saturate/dist/rank_synced.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/plan.h"
#include "saturate/probe/findings.h"
#include "saturate/report/report.h"
#include "saturate/search/decision.h"
#include "saturate/search/fast_path_choice.h"
#include "saturate/search/objective.h"
#include "saturate/search/search.h"

namespace saturate {

/// A JSON value as the Python value json.loads would give (dict, list, str, int, float, bool,
/// None), built directly.
pybind11::object to_python(const nlohmann::json& j);

/// One search as Python receives it: the typed answer, the decision, the objective when one
/// other than memory was asked for, and the printers' JSON and console text.
struct SearchOutcome {
  SearchResult search;
  ComputeSummary compute;  ///< the FLOPs, the rate at the throughput batch, the GEMM peak, the MFU
  std::vector<RankMax> ranks;  ///< several ranks: each one's budget and largest batch (empty: one process)
  BatchDecision decision;
  std::optional<ObjectiveOutcome> objective;
  nlohmann::json json;
  std::string text;
  /// What grew from step to step and what it means for the max ("" when nothing significant).
  std::string memory_growth_warning;
};

/// Any other result as Python receives it: (typed, its JSON as a dict, its text).
template <class T>
pybind11::tuple typed_outcome(const T& typed, const nlohmann::json& json, const std::string& text = "") {
  return pybind11::make_tuple(typed, to_python(json), text);
}

/// The classes: Trial, BatchAlternative, BatchDecision, ObjectiveOutcome, SearchResult,
/// SearchOutcome, FastPathTrial, FastPathChoice, MemoryBreakdown, LeakSite, LeakCheckResult,
/// PlanResult, BottleneckFinding, TrialFindings, MemorySessionResult (read-only attributes, as
/// the C++ fields are named).
void bind_typed_results(pybind11::module_& m);

}  // namespace saturate

// Implements: the memory printers for people: the breakdown table at the peak, the --plan-for
// prediction, the timeline's phases, the leak check's verdict (memory/ computes, this prints).
#pragma once
#include <string>

#include "saturate/memory/breakdown.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/plan.h"
#include "saturate/memory/timeline.h"

namespace saturate {

/// A table for people: each part, its share of the peak, and how it was obtained.
std::string breakdown_table(const MemoryBreakdown& b);
/// The --plan-for prediction, marked as one.
std::string plan_text(const PlanResult& p);
/// The timeline's step: start, peak and the phases' spans.
std::string timeline_summary(const Timeline& t);
/// The leak check's verdict over `steps` steps, with the sites that leak.
std::string leak_text(const LeakCheckResult& r, int steps);

}  // namespace saturate

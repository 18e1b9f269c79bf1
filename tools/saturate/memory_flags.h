// The memory options on probe/search (--empty-cache, --timeline, --plan-for ...) and attaching
// the memory observer that puts `memory_breakdown` into each trial's JSON.
#pragma once
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/memory/timeline.h"
#include "saturate/memory/plan.h"
#include "saturate/session/search_session.h"
#include "saturate/probe/probe.h"

namespace saturate::cli {

/// --empty-cache and --timeline (probe, memory).
void add_memory_probe_flags(CLI::App& app, bool& empty_cache, std::string& timeline);
/// --plan-for, --plan-batches, --plan-allocator, --plan-only (search).
void add_plan_flags(CLI::App& app, PlanForOptions& f);
/// --timeline FILE: `timeline` of a step at `batch`, SVG or JSON by the file's ending.
void write_memory_timeline(const std::string& path, const Timeline& timeline, const Session& s, int64_t batch);
/// --plan-only: the plan without a search here; prints it (or its JSON) and returns the status.
int run_plan_only(const PlanForOptions& f, Session& s, double target_fraction, const std::string& json_path);

}  // namespace saturate::cli

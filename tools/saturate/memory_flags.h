// The memory options on probe/search (--empty-cache, --timeline, --plan-for ...) and attaching
// the memory observer that puts `memory_breakdown` into each trial's JSON.
#pragma once
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/memory/plan.h"
#include "saturate/session/search_session.h"
#include "saturate/probe/probe.h"

namespace saturate::cli {

struct MemoryFlags {
  bool empty_cache = false;
  std::string timeline;
};
/// --empty-cache and --timeline (probe, memory).
void add_memory_probe_flags(CLI::App& app, MemoryFlags& f);
/// --plan-for, --plan-batches, --plan-allocator, --plan-only (search).
void add_plan_flags(CLI::App& app, PlanForOptions& f);

/// The memory observer on `probe` (memory_breakdown in every trial), and the cache policy.
std::unique_ptr<MemoryObserver> attach_memory(const MemoryFlags& f, Probe& probe, Session& s);
/// --timeline FILE: the last trial's last step, SVG or JSON by the file's ending.
void write_memory_timeline(const MemoryFlags& f, const MemoryObserver& observer, const Session& s);
/// --plan-only: the plan without a search here; prints it (or its JSON) and returns the status.
int run_plan_only(const PlanForOptions& f, Session& s, double target_fraction, const std::string& json_path);

}  // namespace saturate::cli

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
#include "saturate/probe/probe.h"

namespace saturate::cli {

struct MemoryFlags {
  bool empty_cache = false;
  std::string timeline;
  std::string plan_for;
  std::string plan_batches = "4,8";
  std::string plan_allocator;  // empty: cuda-caching
  bool plan_only = false;
};
/// --empty-cache and --timeline (probe, memory).
void add_memory_probe_flags(CLI::App& app, MemoryFlags& f);
/// --plan-for, --plan-batches, --plan-allocator, --plan-only (search).
void add_memory_plan_flags(CLI::App& app, MemoryFlags& f);

/// The memory observer on `probe` (memory_breakdown in every trial), and the cache policy.
std::unique_ptr<MemoryObserver> attach_memory(const MemoryFlags& f, Probe& probe, Session& s);
/// --timeline FILE: the last trial's last step, SVG or JSON by the file's ending.
void write_memory_timeline(const MemoryFlags& f, const MemoryObserver& observer, const Session& s);
/// Usage errors of the --plan-* flags, before any device work.
void check_memory_plan_flags(const MemoryFlags& f);
/// --plan-for: records two small batches here and predicts; nullopt when not asked.
std::optional<PlanResult> run_memory_plan(const MemoryFlags& f, Session& s, double target_fraction);
/// --plan-only: the plan without a search here; prints it (or its JSON) and returns the status.
int run_plan_only(const MemoryFlags& f, Session& s, double target_fraction, const std::string& json_path);
/// Adds `plan` and the recommended trial's `memory_breakdown` to a search's JSON.
void add_memory_json(nlohmann::json& j, const SearchResult& result, const std::optional<PlanResult>& plan);

}  // namespace saturate::cli

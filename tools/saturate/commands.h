// The saturate command line: each subcommand registers its flags and the action to run.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "option_flags.h"

#include "saturate/core/memory_meter.h"
#include "saturate/step/workload.h"
#include "saturate/report/report.h"
#include "saturate/session/data_session.h"
#include "saturate/session/workload_session.h"

namespace saturate::cli {

/// The action of the subcommand the user picked; returns the exit status.
using Action = std::function<int()>;

/// Flags every workload command shares (probe, search, ...): the library's WorkloadOptions, the
/// sample shape as written (--input 3x32x32) and where the JSON goes.
struct WorkloadFlags {
  WorkloadFlags() { o.model.name = "convnet"; }  // the command line's default model
  WorkloadOptions o;
  std::string input;
  std::string json;
};
void add_workload_flags(CLI::App& app, WorkloadFlags& f);

/// A device, its meter with the budget applied, and the workload, built from the flags; with
/// `data`, the data opened into `opened` first (the model's input and classes from it).
using Session = WorkloadSession;
std::unique_ptr<Session> open_session(const WorkloadFlags& f, const DataOptions* data = nullptr,
                                      OpenedData* opened = nullptr);

/// --html FILE on search, memory and train: the run's JSON drawn as the self-contained HTML
/// report (report/html_report.h), written after the work (main checks every output before it).
void add_html_flag(CLI::App& app, std::string& path);
void write_html_report(const nlohmann::json& run, const std::string& path);

/// A line on stderr, with the options it names said as flags (with_flags).
void print_line(const std::string& line);

void add_probe_command(CLI::App& app, Action& action);
void add_search_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_monitor_command(CLI::App& app, Action& action);
void add_memory_command(CLI::App& app, Action& action);
void add_launch_command(CLI::App& app, Action& action);
void add_report_command(CLI::App& app, Action& action);

}  // namespace saturate::cli

// The saturate command line: each subcommand registers its flags and the action to run.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "saturate/core/memory_meter.h"
#include "saturate/step/workload.h"
#include "saturate/report/report.h"
#include "saturate/session/workload_session.h"

namespace saturate::cli {

/// The action of the subcommand the user picked; returns the exit status.
using Action = std::function<int()>;

/// Flags every workload command shares (probe, search, ...).
struct WorkloadFlags {
  std::string model = "convnet";
  std::string device = "auto";
  std::string memory_budget;  // empty: 4GiB on CPU, the whole GPU on CUDA
  std::string input;
  int64_t classes = 0, layers = 0, width = 0, heads = 0, seq_len = 0, vocab = 0;
  bool tokens = false;
  std::string optimizer = "adam";
  double lr = 0;
  uint64_t seed = 0;
  int threads = 0;
  std::string json;
};
void add_workload_flags(CLI::App& app, WorkloadFlags& f);

/// A device, its meter with the budget applied, and the workload, built from the flags.
using Session = WorkloadSession;
std::unique_ptr<Session> open_session(const WorkloadFlags& f);

/// The flag that sets a library option ("global_batch" -> "--global-batch"); the option itself
/// when no flag sets it.
std::string flag_for_option(const std::string& option);
/// The flag that sets a library option; nullopt when no flag sets it.
std::optional<std::string> find_flag_for_option(const std::string& option);
/// A library message with each option it names mid-sentence (`global_batch`) said as its flag
/// (--global-batch); options no flag sets stay as written (name_options).
std::string with_flags(const std::string& message);

void add_probe_command(CLI::App& app, Action& action);
void add_search_command(CLI::App& app, Action& action);
void add_train_command(CLI::App& app, Action& action);
void add_monitor_command(CLI::App& app, Action& action);
void add_memory_command(CLI::App& app, Action& action);
void add_launch_command(CLI::App& app, Action& action);
void add_report_command(CLI::App& app, Action& action);

}  // namespace saturate::cli

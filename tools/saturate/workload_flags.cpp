#include <iostream>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/version.h>

#include "commands.h"
#include "flag_checks.h"
#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"

namespace saturate::cli {

void add_workload_flags(CLI::App& app, WorkloadFlags& f) {
  ModelSpec& m = f.o.model;
  add_option_flag(app, "model", m.name);
  add_option_flag(app, "device", f.o.device);
  add_option_flag(app, "memory_budget", f.o.memory_budget);
  add_option_flag(app, "input", f.input);
  add_option_flag(app, "classes", m.classes);
  add_option_flag(app, "layers", m.layers);
  add_option_flag(app, "width", m.width);
  add_option_flag(app, "heads", m.heads);
  add_option_flag(app, "seq_len", m.seq_len);
  add_option_flag(app, "vocab", m.vocab);
  add_option_flag(app, "tokens", m.tokens);
  add_option_flag(app, "optimizer", f.o.optimizer);
  add_option_flag(app, "lr", f.o.lr);
  add_option_flag(app, "seed", m.seed);
  add_option_flag(app, "threads", f.o.threads)->check(thread_count("CPU threads; 0: LibTorch's choice"));
  add_option_flag(app, "json", f.json);
}

void print_line(const std::string& line) { std::cerr << with_flags(line) << "\n"; }

std::unique_ptr<Session> open_session(const WorkloadFlags& f, const DataOptions* data, OpenedData* opened) {
  // a folder or a missing folder at --json is bad input: say so before the work, not after
  if (!f.json.empty() && f.json != "-") check_output_path(f.json, {"--json", "result.json"});
  WorkloadOptions o = f.o;
  if (!f.input.empty()) o.model.input_shape = parse_shape(f.input, "--input");
  if (data) *opened = open_data(*data, o);  // before any device work: input and classes from the data
  return open_workload(o);
}

}  // namespace saturate::cli

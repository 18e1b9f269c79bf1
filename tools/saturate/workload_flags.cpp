#include <iostream>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/version.h>

#include "commands.h"
#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"
#include "saturate/report/html_report.h"

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
  add_option_flag(app, "threads", f.o.threads)->check(thread_count("CPU threads; 0: auto"));
  add_option_flag(app, "json", f.json);
}

void add_html_flag(CLI::App& app, std::string& path) { add_option_flag(app, "html", path); }

void write_html_report(const nlohmann::json& run, const std::string& path) {
  // the report names options (`json`); the command line's report names its flags
  if (!path.empty()) write_output_file(path, with_flags(render_html_report(run)), {"--html", "report.html"});
}

void print_line(const std::string& line) { std::cerr << with_flags(line) << "\n"; }

std::unique_ptr<Session> open_session(const WorkloadFlags& f, const DataOptions* data, OpenedData* opened) {
  WorkloadOptions o = f.o;
  if (!f.input.empty()) o.model.input_shape = parse_shape(f.input, "--input");
  if (data) *opened = open_data(*data, o);  // before any device work: input and classes from the data
  return open_workload(o);
}

}  // namespace saturate::cli

#include "saturate/report/run_context.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "saturate/core/build_info.h"

namespace saturate {

RunContext run_context_here() {
  RunContext c;
  const BuildInfo& b = build_info();
  c.saturate_version = b.version;
  c.git_commit = b.git_commit;
  c.build_type = b.build_type;
  c.compiler = b.compiler;
  c.sanitizers = b.sanitizers;
  c.libtorch_version = b.torch_version;
  c.cuda_version = b.cuda_version;
  const HostInfo h = host_info();
  c.host = h.hostname;
  c.cpu_name = h.cpu_name;
  c.cpu_cores = h.cpu_cores;
  return c;
}

nlohmann::json context_json(const RunContext& c) {
  nlohmann::json j = {{"device", c.device},
                      {"device_info", c.device_info},
                      {"threads_reason", c.threads_reason},
                      {"model", {{"name", c.model_name}, {"parameters", c.model_parameters}, {"input", c.input}}},
                      {"optimizer", c.optimizer},
                      {"budget_bytes", c.budget_bytes},
                      {"world_size", c.world_size},
                      {"libtorch_version", c.libtorch_version},
                      {"saturate_version", c.saturate_version},
                      {"build",
                       {{"version", c.saturate_version},
                        {"git_commit", c.git_commit},
                        {"build_type", c.build_type},
                        {"compiler", c.compiler},
                        {"libtorch_version", c.libtorch_version},
                        {"cuda_version", c.cuda_version}}},
                      {"host", {{"name", c.host}, {"cpu", c.cpu_name}, {"cpu_cores", c.cpu_cores}}}};
  if (!c.command.empty()) j["command"] = c.command;
  if (!c.gpu_name.empty()) j["gpu_name"] = c.gpu_name;
  if (!c.sanitizers.empty()) j["build"]["sanitizers"] = c.sanitizers;
  return j;
}

std::string provenance_line(const RunContext& c) {
  std::string build = c.git_commit.empty() ? c.build_type : fmt::format("{}, {}", c.git_commit, c.build_type);
  if (!c.sanitizers.empty()) build += ", sanitizers " + c.sanitizers;
  const std::string cuda = c.cuda_version.empty() ? "" : ", CUDA " + c.cuda_version;
  const std::string cpu = c.cpu_name.empty() ? "" : c.cpu_name + ", ";
  const std::string ranks = c.world_size > 1 ? fmt::format(", {} ranks", c.world_size) : "";
  return fmt::format("saturate {} ({}), LibTorch {}{} on {} ({}{} cores){}", c.saturate_version, build,
                     c.libtorch_version, cuda, c.host.empty() ? "this host" : c.host, cpu, c.cpu_cores, ranks);
}

}  // namespace saturate

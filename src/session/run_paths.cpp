#include "saturate/session/run_paths.h"

#include <glob.h>

#include <filesystem>

#include "saturate/core/output_file.h"
#include "saturate/data/dataset.h"
#include "dist/job_settings.h"
#include "train/checkpoint_file.h"

namespace saturate {
namespace {

/// The path a `data` value reads ("tokens:FILE" -> FILE, "idx:DIR" -> DIR, "fashion-mnist" ->
/// Debian's folder); "" for data that names none (synthetic) or many (a wds: glob, its shards).
std::string data_path(const std::string& data) {
  const size_t colon = data.find(':');
  const std::string kind = data.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : data.substr(colon + 1);
  if (kind == "fashion-mnist" || kind == "fashion_mnist") return arg.empty() ? DatasetOptions{}.fashion_mnist_dir : arg;
  if (kind == "wds" && arg.find_first_of("*?[") != std::string::npos) return "";  // the shards, one by one (below)
  for (const char* k : {"idx", "mnist", "cifar10", "cifar100", "images", "wds", "tokens", "text"})
    if (kind == k) return arg;
  return "";
}

}  // namespace

std::optional<PathUse> path_use(const std::string& option, const std::string& value) {
  for (const char* o : {"json", "html", "save", "trace", "timeline", "log", "profile_ops", "output"})
    if (option == o) return PathUse{option, value, PathRole::kOutput, {}};
  if (option == "checkpoint_dir" || option == "resume")
    return PathUse{option, value, PathRole::kOutputFolder, {checkpoint_file_name(), checkpoint_lock_file_name()}};
  if (option == "model" || option == "run") return PathUse{option, value, PathRole::kInput, {}};
  if (option == "data") return PathUse{option, data_path(value), PathRole::kInput, {}};
  return std::nullopt;
}

void check_run_paths(const std::vector<PathUse>& uses) {
  check_path_plan(uses);
  for (const PathUse& use : uses) {
    if (use.path.empty() || use.path == "-") continue;
    if (use.role == PathRole::kOutputFolder && use.option == "checkpoint_dir") check_checkpoint_dir(use.path, use.option);
    if (use.role != PathRole::kOutput) continue;
    // the name a folder given instead of a file suggests
    const char* name = use.option == "save" ? "model.pt" : use.option == "timeline" ? "step.svg"
                       : use.option == "trace" ? "trace.json" : use.option == "log" ? "monitor.csv"
                       : use.option == "html" || use.option == "output" ? "report.html" : "result.json";
    check_output_path(use.path, {"`" + use.option + "`", name});
  }
}

void check_command(const std::string& command, const std::vector<OptionValue>& values) {
  std::vector<PathUse> uses;
  for (const OptionValue& v : values) {
    if (auto use = path_use(v.option, v.value)) uses.push_back(*use);
    // wds:GLOB reads the shards it matches, not the whole folder (which may hold anything else)
    if (v.option == "data" && v.value.rfind("wds:", 0) == 0 && v.value.find_first_of("*?[", 4) != std::string::npos) {
      glob_t g{};
      if (::glob(v.value.c_str() + 4, 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) uses.push_back({v.option, g.gl_pathv[i], PathRole::kInput, {}});
      globfree(&g);
    }
  }
  check_run_paths(uses);
  JobSettings job;
  job.items.emplace_back("command", command);
  for (OptionValue v : values) {
    if (!v.given) continue;
    const auto use = path_use(v.option, v.value);
    if (use && use->role != PathRole::kInput) continue;  // each rank may write its own (only rank 0 writes)
    if (use && !use->path.empty()) {
      // a path may differ between machines (another mount): the kind of data, the model file's name
      v.value = v.option == "data" ? v.value.substr(0, v.value.find(':')) + ":..."
                                   : std::filesystem::path(use->path).filename().string();
    }
    bool per_rank = false;
    for (const char* o : {"device", "memory_budget", "threads", "workers", "prefetch", "quiet", "watch.quiet",
                          "report.quiet", "sample_hz", "watch.sample_hz", "dist_timeout"})
      per_rank = per_rank || v.option == o;
    if (!per_rank) job.items.emplace_back(v.option, v.value);
  }
  set_job_settings(std::move(job));
}

}  // namespace saturate

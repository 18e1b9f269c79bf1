#include "saturate/session/run_paths.h"

#include "saturate/core/output_file.h"
#include "saturate/train/checkpoint_file.h"

namespace saturate {
namespace {

/// The path a `data` value reads ("tokens:FILE" -> FILE); "" for data that names none.
std::string data_path(const std::string& data) {
  const size_t colon = data.find(':');
  if (colon == std::string::npos) return "";
  const std::string kind = data.substr(0, colon);
  for (const char* k : {"idx", "cifar10", "cifar100", "images", "wds", "tokens", "text"})
    if (kind == k) return data.substr(colon + 1);
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

}  // namespace saturate

// Reading a run's JSON for the HTML report (html_run.h), and run_kind (report/html_report.h).
#include "html_run.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/report/html_report.h"

namespace saturate::html {

std::optional<double> opt_number(const json& obj, const char* key, const std::string& path) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const json& v = obj[key];
  if (!v.is_number())
    throw UsageError(fmt::format("{}{}: expected a number, got {} {}", path.empty() ? "" : path + ".", key,
                                 v.type_name(), v.dump().substr(0, 40)));
  return v.get<double>();
}

std::string opt_string(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return "";
  const json& v = obj[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

const json* opt_object(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_object()) return nullptr;
  return &obj[key];
}

std::string esc(const std::string& s) { return html_escape(s); }
std::string fine_percent(double part, double whole) {
  if (!(whole > 0)) return "-";
  const double p = 100.0 * part / whole;
  if (p == 0) return "0 %";
  if (p > 0 && p < 0.1) return "<0.1 %";
  return p < 10 ? fmt::format("{:.1f} %", p) : fmt::format("{:.0f} %", p);
}
std::string bytes(double b) { return format_bytes(static_cast<int64_t>(std::llround(b))); }
std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.0f} %", 100.0 * part / whole) : std::string("-");
}

TrialView read_trial(const json& t, int index, const std::string& path) {
  if (!t.is_object()) throw UsageError(fmt::format("{}: expected an object, got {}", path, t.type_name()));
  TrialView v;
  v.index = index;
  v.j = &t;
  const auto batch = opt_number(t, "batch", path);
  if (!batch) throw UsageError(fmt::format("{}: no 'batch' (every trial has its batch size)", path));
  v.batch = *batch;
  if (!t.contains("status") || !t["status"].is_string())
    throw UsageError(fmt::format("{}: no 'status' string (ok, oom, over-target or error)", path));
  v.status = t["status"].get<std::string>();
  v.peak_reserved = opt_number(t, "peak_reserved_bytes", path);
  v.peak_allocated = opt_number(t, "peak_allocated_bytes", path);
  v.samples_per_s = opt_number(t, "samples_per_s", path);
  v.step_time_ms = opt_number(t, "step_time_ms", path);
  return v;
}

const TrialView* Run::recommended() const {
  const json* search = kind == "train" ? opt_object(j, "batch_search") : &j;  // train: its micro-batch search
  if (kind != "search" && kind != "train") return trials.empty() ? nullptr : &trials.front();
  if (!search) return nullptr;
  const auto rec = opt_number(*search, "recommended_batch", kind == "train" ? "batch_search" : "");
  const TrialView* found = nullptr;
  for (const TrialView& t : trials)
    if (rec && t.batch == *rec && t.ok()) found = &t;
  return found;
}

std::string model_name(const json& j) {
  if (const json* m = opt_object(j, "model")) return opt_string(*m, "name");
  return opt_string(j, "model");
}

std::string missing(const std::string& chart, const std::string& sentence) {
  return fmt::format("<p class=\"missing\" data-chart=\"{}\">{}</p>\n", chart, sentence);
}

ChartAxis batch_axis(const std::vector<TrialView>& trials) {
  double lo = trials.front().batch, hi = lo;
  for (const TrialView& t : trials) {
    lo = std::min(lo, t.batch);
    hi = std::max(hi, t.batch);
  }
  const std::string label = "batch size (samples per step)";
  if (lo >= 1 && hi / lo >= 8) {
    ChartAxis a = log2_axis(label + ", log scale", lo, hi);
    return a;
  }
  return linear_axis(label, 0, hi * 1.15, true);
}

std::string status_class(const std::string& status) {
  if (status == "ok" || status == "oom" || status == "over-target") return status;
  return "error";
}

std::string trial_tooltip(const TrialView& t) {
  std::string s = fmt::format("trial {}: batch {}, {}", t.index + 1, number_text(t.batch), t.status);
  if (t.peak_reserved) s += ", peak reserved " + bytes(*t.peak_reserved);
  if (t.ok() && t.samples_per_s) s += fmt::format(", {:.1f} samples/s", *t.samples_per_s);
  const std::string error = opt_string(*t.j, "error");
  if (!error.empty()) s += " — " + error;
  return s;
}

bool plan_only(const Run& run) { return run.kind == "search" && run.trials.empty() && opt_object(run.j, "plan"); }

const std::vector<Part>& breakdown_parts() {
  static const std::vector<Part> parts = {
      {"parameters_bytes", "parameters"},         {"gradients_bytes", "gradients"},
      {"optimizer_state_bytes", "optimizer state"}, {"inputs_bytes", "inputs"},
      {"activations_bytes", "activations"},       {"workspace_bytes", "workspace"},
      {"other_bytes", "other"},                   {"allocator_overhead_bytes", "allocator overhead"}};
  return parts;
}

const json* find_breakdown(const Run& run, std::string* where) {
  if (const json* b = opt_object(run.j, "memory_breakdown")) {
    *where = "memory_breakdown";
    return b;
  }
  if (const TrialView* rec = run.recommended())
    if (const json* b = opt_object(*rec->j, "memory_breakdown")) {
      *where = fmt::format("trials[{}].memory_breakdown", rec->index);
      return b;
    }
  return nullptr;
}

}  // namespace saturate::html

namespace saturate {

using html::opt_string;

std::string run_kind(const nlohmann::json& run) {
  if (!run.is_object())
    throw UsageError(fmt::format("not a saturate run: the JSON is {} {}, expected the object that saturate search, "
                                 "memory, probe or train writes with `json`",
                                 run.is_array() ? "an" : "a", run.type_name()));
  if (run.contains("trials")) {
    if (!run["trials"].is_array())
      throw UsageError(fmt::format("'trials': expected an array of trials, got {}", run["trials"].type_name()));
    return "search";
  }
  const std::string command = opt_string(run, "command");  // written by newer builds
  if (run.contains("plan") && run["plan"].is_object() && (command.empty() || command == "search"))
    return "search";  // --plan-only: a prediction for another device, no trials here
  if (run.contains("global_batch") && run.contains("steps")) return "train";
  if (run.contains("batch") && run.contains("status") && run.contains("peak_reserved_bytes"))
    return command == "memory" || command == "probe" ? command
           : run.contains("timeline") || run.contains("leak") ? "memory"
                                                               : "probe";
  std::string keys;
  int n = 0;
  for (const auto& [k, v] : run.items()) {
    if (n++ == 8) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "'" : ", '") + k + "'";
  }
  throw UsageError(fmt::format(
      "not a saturate run: no 'trials' (saturate search `json`), no 'global_batch' and 'steps' (saturate train "
      "`json`), no 'batch', 'status' and 'peak_reserved_bytes' (saturate memory or probe `json`); its keys are {}",
      keys.empty() ? "none" : keys));
}

}  // namespace saturate

#include "saturate/report/train_text.h"

#include <cstdint>

#include <fmt/format.h>

#include "saturate/core/units.h"

namespace saturate {

std::string train_rank_text(const nlohmann::json& j) {
  if (j.value("backend", std::string("none")) == "none") return "";
  return fmt::format("ranks       {} ({}): all-reduce {:.2f} ms per step, {:.0f} % overlapped with backward, {} "
                     "bucket(s) of {} in all\n",
                     j["world_size"].get<int>(), j["backend"].get<std::string>(), j["allreduce_ms"].get<double>(),
                     100.0 * j["allreduce_overlap_fraction"].get<double>(), j["gradient_buckets"].get<int64_t>(),
                     format_bytes(j["gradient_bytes"].get<int64_t>()));
}

std::string train_summary_text(const nlohmann::json& j) {
  std::string s = fmt::format(
      "trained     {} on {}: {} steps, {} samples, {:.2f} epochs\nbatch       micro {} x {} = global {}\n"
      "train loss  {:.4f}\n",
      j["model"]["name"].get<std::string>(), j["data"].get<std::string>(), j["steps"].get<int64_t>(),
      j["samples_seen"].get<int64_t>(), j["epochs"].get<double>(), j["micro_batch"].get<int64_t>(),
      j["accumulation"].get<int64_t>(), j["global_batch"].get<int64_t>(), j["final_train_loss"].get<double>());
  if (j.contains("bottleneck"))
    s += fmt::format("bottleneck  {}: {}\nfix         {}\n", j["bottleneck"].value("verdict", ""),
                     j["bottleneck"].value("reason", ""), j["bottleneck"].value("fix", ""));
  s += train_rank_text(j);
  if (j.contains("gradient_noise_scale")) {
    const auto& n = j["gradient_noise_scale"];
    s += fmt::format("noise scale {} (B_simple, smoothed over the last ~20 of {} steps measured)\n",
                     n["value"].is_number() ? fmt::format("{:.0f} samples", n["value"].get<double>())
                                            : std::string("not measurable (the gradient is all noise)"),
                     n["measurements"].get<int64_t>());
  }
  // the held-out split's results under its name: "test" or "val"
  if (j.contains("eval_split") && j["eval_split"].is_string()) {
    const std::string split = j["eval_split"].get<std::string>();
    const std::string loss = "final_" + split + "_loss", accuracy = "final_" + split + "_accuracy";
    if (j.contains(accuracy) && j[accuracy].is_number())
      s += fmt::format("{:<12}loss {:.4f}, accuracy {:.2f} %\n", split, j[loss].get<double>(),
                       100.0 * j[accuracy].get<double>());
  }
  if (j.contains("mfu"))
    s += fmt::format("compute     {}/sample, {}/s = {:.1f} % MFU of {}/s ({})\n",
                     format_flops(j["flops_per_sample"].get<double>()),
                     format_flops(j["achieved_flops_per_s"].get<double>()), 100 * j["mfu"].get<double>(),
                     format_flops(j["peak_flops_per_s"].get<double>()), j["peak_method"].get<std::string>());
  s += fmt::format("throughput  {:.1f} samples/s\noom backoffs {}\ncheckpoints {}{}\n", j["samples_per_s"].get<double>(),
                   j["oom_backoffs"].size(), j["checkpoints_written"].get<int64_t>(),
                   j["resumed_from"].is_number() ? fmt::format(" (resumed from step {})", j["resumed_from"].get<int64_t>())
                                                 : "");
  if (j.contains("interrupted") && j["interrupted"].is_object()) {
    const auto& i = j["interrupted"];
    s += fmt::format("interrupted by {} after step {}: {}\n", i["signal"].get<std::string>(),
                     i["after_step"].get<int64_t>(),
                     i["checkpoint"].is_string()
                         ? fmt::format("checkpoint written; continue with `resume` {}", i["checkpoint"].get<std::string>())
                         : std::string("no checkpoint (give `checkpoint_dir` DIR to keep the progress)"));
  }
  return s;
}

}  // namespace saturate

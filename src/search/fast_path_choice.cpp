#include "saturate/search/fast_path_choice.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/statistics.h"

namespace saturate {
namespace {


std::string failure_note(const Trial& t) {
  return fmt::format("{}: {}", to_string(t.status), t.error.empty() ? "no steps ran" : t.error);
}

}  // namespace

FastPathChoice choose_fast_paths(const FastPaths& start, const std::vector<FastPathCandidate>& candidates,
                                 const FastPathMeasure& measure, const FastPathChoiceOptions& options) {
  FastPathChoice choice;
  choice.chosen = start;
  const int rounds = std::max(1, options.rounds);
  for (const FastPathCandidate& c : candidates) {
    FastPathTrial tried;
    tried.name = c.name;
    const FastPaths with = c.apply(choice.chosen);
    if (with == choice.chosen) continue;  // already on
    std::vector<double> base_ms, with_ms;
    for (int r = 0; r < rounds && tried.note.empty(); ++r) {
      const Trial b = measure(choice.chosen);
      if (!b.ok()) {
        tried.note = "the current choice failed: " + failure_note(b);
        break;
      }
      base_ms.push_back(b.step_time_ms);
      const Trial w = measure(with);
      if (!w.ok()) {
        tried.note = failure_note(w);
        break;
      }
      with_ms.push_back(w.step_time_ms);
    }
    tried.baseline_ms = median(base_ms);
    if (choice.baseline_ms == 0) choice.baseline_ms = tried.baseline_ms;
    if (tried.note.empty()) {
      tried.with_ms = median(with_ms);
      tried.gain = tried.with_ms > 0 ? tried.baseline_ms / tried.with_ms - 1 : 0;
      tried.kept = tried.gain >= options.min_gain;
      if (!tried.kept) tried.note = fmt::format("{:+.1f} % steps/s, below the {:.0f} % a switch must gain", 100 * tried.gain,
                                                100 * options.min_gain);
    }
    if (tried.kept) choice.chosen = with;
    choice.chosen_ms = tried.kept ? tried.with_ms : tried.baseline_ms;
    choice.tried.push_back(tried);
  }
  return choice;
}

std::vector<FastPathCandidate> fast_path_candidates(bool cuda, bool conv_model, bool fp32_step, int threads,
                                                    bool graphable) {
  std::vector<FastPathCandidate> out;
  if (cuda && conv_model)
    out.push_back({"cudnn_benchmark", [](FastPaths p) { p.cudnn_benchmark = true; return p; }});
  if (cuda && fp32_step) out.push_back({"tf32", [](FastPaths p) { p.tf32 = true; return p; }});
  if (conv_model) out.push_back({"channels_last", [](FastPaths p) { p.channels_last = true; return p; }});
  out.push_back({"fused_optimizer", [](FastPaths p) { p.fused_optimizer = true; return p; }});
  if (cuda && graphable) out.push_back({"cuda_graphs", [](FastPaths p) { p.cuda_graphs = true; return p; }});
  if (!cuda && threads > 1) {
    const int half = threads / 2;
    out.push_back({fmt::format("threads={}", half), [half](FastPaths p) { p.threads = half; return p; }});
  }
  return out;
}

}  // namespace saturate

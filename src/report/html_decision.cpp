// The decision of the HTML report in words: a search's recommended, maximal and throughput
// batches and why each, a memory or probe run's peak against the budget, a train run's batch
// and speed; each with the bottleneck, where the memory goes and what to change.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "html_run.h"
#include "saturate/core/units.h"
#include "saturate/search/decision.h"
#include "saturate/search/goodput.h"

namespace saturate::html {
namespace {

std::string li(const std::string& html) { return "<li>" + html + "</li>\n"; }

std::string bottleneck_words(const json* b, const std::string& at) {
  if (!b) return "";
  const std::string verdict = opt_string(*b, "verdict");
  if (verdict.empty()) return "";
  std::string s = fmt::format("<b>Bottleneck{}: {}</b> — {}.", at, esc(verdict), esc(opt_string(*b, "reason")));
  const std::string fix = opt_string(*b, "fix");
  if (!fix.empty()) s += " <b>What to change:</b> " + esc(fix) + ".";
  return li(s);
}

/// Advice from where the memory goes, when one part dominates.
std::string memory_words(const Run& run) {
  std::string where;
  const json* b = find_breakdown(run, &where);
  if (!b) return "";
  const auto peak = opt_number(*b, "peak_allocated_bytes", where);
  if (!peak || *peak <= 0) return "";
  std::string top_name;
  double top = -1;
  for (const Part& p : breakdown_parts())
    if (const auto v = opt_number(*b, p.key, where); v && *v > top) {
      top = *v;
      top_name = p.name;
    }
  std::string s = fmt::format("<b>Memory at the peak:</b> {} is the largest part, {} ({} of {}).", esc(top_name),
                              bytes(top), percent(top, *peak), bytes(*peak));
  const double act = opt_number(*b, "activations_bytes", where).value_or(0);
  const double opt = opt_number(*b, "optimizer_state_bytes", where).value_or(0);
  const std::string precision = opt_string(run.j, "precision");
  std::string ckpt = opt_string(run.j, "checkpointing");
  if (const json* cj = opt_object(run.j, "checkpointing")) ckpt = opt_string(*cj, "choice");
  if (act / *peak > 0.5) {
    std::vector<std::string> fixes;
    if (ckpt.empty() || ckpt == "none") fixes.push_back("activation checkpointing (<code>`checkpointing` auto</code>)");
    if (precision.empty() || precision == "fp32" || precision == "tf32")
      fixes.push_back("mixed precision (<code>`precision` bf16</code>)");
    if (!fixes.empty())
      s += fmt::format(" Activations grow with the batch: {} would make room for a larger one.",
                       fmt::format("{}{}{}", fixes[0], fixes.size() > 1 ? " or " : "", fixes.size() > 1 ? fixes[1] : ""));
  } else if (opt / *peak > 0.3 && opt_string(run.j, "optimizer") != "sgd") {
    s += " Adam and AdamW keep two state tensors per parameter; <code>`optimizer` sgd</code> keeps none (with momentum: one).";
  }
  return li(s);
}

std::string compute_words(const json& c) {
  const auto mfu = opt_number(c, "mfu", "compute");
  const auto achieved = opt_number(c, "achieved_flops_per_s", "compute");
  const auto peak = opt_number(c, "peak_flops_per_s", "compute");
  if (!mfu || !achieved) return "";
  std::string s = fmt::format("<b>Compute:</b> {}/s = {:.1f} % MFU", format_flops(*achieved), 100.0 * *mfu);
  if (peak) s += fmt::format(" of {}/s ({})", format_flops(*peak), esc(opt_string(c, "peak_method")));
  const auto batch = opt_number(c, "batch", "compute");
  if (batch) s += " at batch " + number_text(*batch);
  return li(s + ".");
}

/// --plan-for: the prediction for another device.
std::string plan_words(const json& j) {
  const json* p = opt_object(j, "plan");
  if (!p) return "";
  const auto max = opt_number(*p, "max_batch", "plan"), rec = opt_number(*p, "recommended_batch", "plan");
  const auto capacity = opt_number(*p, "capacity_bytes", "plan");
  const auto peak = opt_number(*p, "predicted_peak_bytes", "plan"), target = opt_number(*p, "target_bytes", "plan");
  std::string s = fmt::format("<b>Prediction for {}</b>", esc(opt_string(*p, "target")));
  if (capacity) s += " (" + bytes(*capacity) + ")";
  s += ":";
  if (rec) s += fmt::format(" recommended_batch {}", number_text(*rec));
  if (peak) s += " (predicted peak " + bytes(*peak) + (target ? " within the target " + bytes(*target) : "") + ")";
  if (max) s += fmt::format(", max_batch {}", number_text(*max));
  s += ". A prediction from this device's run, not a measurement there";
  const std::string method = opt_string(*p, "method");
  return li(s + (method.empty() ? "." : ": " + esc(method) + "."));
}

/// recommended_batch: its measured peak against the target, exact or not.
std::string recommended_words(const Run& run, double rec, const TrialView* rt) {
  const double pct_target = run.budget && run.target && *run.budget > 0 ? 100.0 * *run.target / *run.budget : 0;
  std::string s = fmt::format("<b>recommended_batch {}</b>: the largest batch whose measured peak", number_text(rec));
  if (rt && rt->peak_reserved) s += " (" + bytes(*rt->peak_reserved) + ")";
  s += " stays within the target";
  if (run.target && run.budget)
    s += fmt::format(", {:.0f} % of the {} budget = {}", pct_target, bytes(*run.budget), bytes(*run.target));
  s += run.j.value("recommended_exact", false) ? fmt::format("; exact: batch {} went over it.", number_text(rec + 1))
                                               : ".";
  s += " The margin absorbs memory that varies between steps and runs (fragmentation, data of varying size).";
  return li(s);
}

/// max_batch and why it is (or is not) exact; what it leaves of the budget.
std::string max_words(const Run& run, double max) {
  const json& j = run.j;
  std::string s = fmt::format("<b>max_batch {}</b>: the largest batch that fits the budget at all", number_text(max));
  double next = 0;  // divisors: the smallest batch above the max that ran (it did not fit)
  for (const TrialView& t : run.trials)
    if (!t.ok() && t.batch > max && (next == 0 || t.batch < next)) next = t.batch;
  if (j.value("capped", false))
    s += " (capped by <code>`max_batch`</code>)";
  else if (j.value("max_batch_exact", false))
    s += fmt::format(" (exact: {} ran out of memory)", number_text(max + 1));
  else if (!opt_string(j, "error").empty())
    s += " (not exact: a trial failed)";
  else if (opt_string(j, "strategy") == "power")
    s += " (not exact: the strategy stops at a power of two)";
  else if (opt_string(j, "strategy") == "divisors" && next > 0)
    s += fmt::format(" among the divisors tried (the next, {}, ran out of memory)", number_text(next));
  else
    s += " (not exact: the search stopped before a batch ran out of memory)";
  for (const TrialView& t : run.trials)
    if (t.ok() && t.batch == max && t.peak_reserved && run.budget) {
      s += fmt::format("; it leaves {} of the budget free", bytes(*run.budget - *t.peak_reserved));
      break;
    }
  return li(s + ".");
}

/// throughput_batch: the fastest memory probe up to the recommended batch, and what it hints.
std::string throughput_words(const Run& run, double tb, double rec) {
  double best = 0, best_batch = 0;
  for (const TrialView& t : run.trials)
    if (t.ok() && t.batch <= rec && t.samples_per_s && *t.samples_per_s > best) {
      best = *t.samples_per_s;
      best_batch = t.batch;
    }
  std::string s = fmt::format("<b>throughput_batch {}</b>: the smallest memory probe up to the recommended batch "
                              "within 3 % of the fastest probe's samples/s ({:.1f} at batch {}).",
                              number_text(tb), best, number_text(best_batch));
  if (tb < rec)
    s += fmt::format(" One timed step per probe: a hint that batches above {} add memory, not speed; time the "
                     "curve with <code>`objective`</code> throughput before relying on it.",
                     number_text(tb));
  else
    s += " Throughput still grows up to the recommended batch: memory is what limits it.";
  return li(s);
}

}  // namespace

std::string search_decision(const Run& run) {
  const json& j = run.j;
  const auto rec = opt_number(j, "recommended_batch", "");
  const auto max = opt_number(j, "max_batch", "");
  const auto tb = opt_number(j, "throughput_batch", "");
  std::string lead, items;
  const std::string error = opt_string(j, "error");
  if (run.trials.empty() && opt_object(j, "plan")) {
    const auto rec_there = opt_number(j["plan"], "recommended_batch", "plan");
    lead = fmt::format("Predicted for {}: batch <b>{}</b> (<code>`plan_only`</code>: nothing measured here)",
                       esc(opt_string(j["plan"], "target")), rec_there ? number_text(*rec_there) : "-");
    return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + plan_words(j) + "</ul>\n";
  }
  if (!rec || *rec <= 0) {
    lead = "No batch fits: " + (error.empty() ? std::string("no trial ran under the budget.") : esc(error));
    return "<p class=\"lead\">" + lead + "</p>\n<ul>\n" + plan_words(j) + "</ul>\n";
  }
  // the one answer (search/decision.h): the batch the run's objective chose, capped at the
  // memory-safe one; older JSON without a decision leads with the recommended batch
  std::optional<BatchDecision> decision;  // read once into the typed decision, printed from it
  if (const json* saved = opt_object(j, "decision")) decision = decision_from_json(*saved);
  const double decided = decision && decision->batch > 0 ? static_cast<double>(decision->batch) : *rec;
  lead = fmt::format("Train at batch <b>{}</b>", number_text(decided));
  if (decision) {
    const std::string by = to_string(decision->objective);
    lead += fmt::format(" (objective {}{})", esc(by),
                        decision->requested != decision->objective ? ", asked for " + esc(to_string(decision->requested))
                                                                   : std::string());
    std::string s = "<b>Why:</b> " + esc(decision->reason) + ".";
    for (const BatchAlternative& a : decision->alternatives)
      s += fmt::format(" <b>Alternative {}</b>: batch {}, {}.", esc(a.name), number_text(static_cast<double>(a.batch)),
                       esc(a.reason));
    items += li(s);
  }
  const TrialView* rt = run.recommended();
  items += recommended_words(run, *rec, rt);
  if (max && *max > 0) items += max_words(run, *max);
  if (const json* bd = opt_object(j, "boundary")) {
    const bool confirmed = bd->value("confirmed", false);
    items += li(confirmed ? fmt::format("<b>Boundary confirmed</b> by {} re-probe(s).",
                                        number_text(opt_number(*bd, "confirm_runs", "boundary").value_or(0)))
                          : fmt::format("<b>The boundary moves</b> between runs by {} batch(es); max_batch is the "
                                        "largest that fit every time.",
                                        number_text(opt_number(*bd, "spread", "boundary").value_or(0))));
  }
  if (tb && *tb > 0) items += throughput_words(run, *tb, *rec);
  if (const json* o = opt_object(j, "objective")) {
    const std::string reason = opt_string(*o, "reason");
    if (!reason.empty())
      items += li(fmt::format("<b>Objective {}</b>: {} (batch {}).", esc(opt_string(*o, "objective")), esc(reason),
                              number_text(opt_number(*o, "batch", "objective").value_or(0))));
  }
  if (const json* law = opt_object(j, "memory_model"); law && law->value("valid", false))
    items += li(fmt::format("<b>Memory law</b>: {} fixed + {} per sample, fitted to the trials and verified at the "
                            "boundary.",
                            bytes(opt_number(*law, "fixed_bytes", "memory_model").value_or(0)),
                            bytes(opt_number(*law, "per_sample_bytes", "memory_model").value_or(0))));
  items += bottleneck_words(rt && rt->j->contains("bottleneck") ? &(*rt->j)["bottleneck"] : nullptr,
                            rt ? " at batch " + number_text(rt->batch) : "");
  items += memory_words(run);
  if (const json* cj = opt_object(j, "checkpointing")) {
    const std::string reason = opt_string(*cj, "reason");
    if (!reason.empty())
      items += li(fmt::format("<b>Checkpointing {}</b> ({}): {}.", esc(opt_string(*cj, "choice")),
                              esc(opt_string(*cj, "policy")), esc(reason)));
  }
  if (const json* fj = opt_object(j, "fast_paths")) {
    const std::string chosen = opt_string(*fj, "chosen");
    const std::string reason = opt_string(*fj, "reason");
    if (!chosen.empty())
      items += li(fmt::format("<b>Fast paths:</b> {}{}.", esc(chosen), reason.empty() ? "" : " — " + esc(reason)));
  }
  if (const json* cj = opt_object(j, "compute")) items += compute_words(*cj);
  items += plan_words(j);
  if (!error.empty()) items += li("<b>Error:</b> " + esc(error));
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

std::string single_decision(const Run& run) {
  const TrialView& t = run.trials.front();
  std::string lead = fmt::format("Batch <b>{}</b>: {}", number_text(t.batch), esc(t.status));
  std::string items;
  if (t.peak_reserved) {
    lead += ", peak " + bytes(*t.peak_reserved);
    if (run.budget) lead += fmt::format(" of the {} budget ({})", bytes(*run.budget), percent(*t.peak_reserved, *run.budget));
  }
  if (t.ok() && t.samples_per_s)
    items += li(fmt::format("<b>Throughput:</b> {:.1f} samples/s, {:.2f} ms per step.", *t.samples_per_s,
                            t.step_time_ms.value_or(0)));
  const std::string error = opt_string(run.j, "error");
  if (!error.empty()) items += li("<b>Error:</b> " + esc(error));
  items += memory_words(run);
  // how far the budget reaches, from the parts that grow with the batch
  std::string where;
  if (const json* b = find_breakdown(run, &where); b && run.budget && t.ok() && t.batch > 0) {
    double growing = 0;
    for (const char* k : {"inputs_bytes", "activations_bytes", "workspace_bytes"})
      growing += opt_number(*b, k, where).value_or(0);
    const auto peak = opt_number(*b, "peak_reserved_bytes", where);
    if (peak && growing > 0) {
      const double per = growing / t.batch, fixed = *peak - growing;
      const double fit = std::floor((0.9 * *run.budget - fixed) / per);
      if (fit > 0)
        items += li(fmt::format("<b>Rough reach:</b> inputs, activations and workspace take {} per sample here; at that "
                                "rate about batch {} would fill 90 % of the budget. <code>saturate search</code> finds "
                                "the batch exactly.",
                                bytes(per), number_text(fit)));
    }
  }
  if (const json* leak = opt_object(run.j, "leak")) {
    const auto steps = opt_number(*leak, "steps", "leak");
    if (leak->value("detected", false))
      items += li(fmt::format("<b>Leak DETECTED:</b> +{} per step from step {} (over {} steps).",
                              bytes(opt_number(*leak, "bytes_per_step", "leak").value_or(0)),
                              number_text(opt_number(*leak, "first_step", "leak").value_or(0)),
                              number_text(steps.value_or(0))));
    else
      items += li(fmt::format("<b>No leak:</b> the memory allocated after each step stays flat over {} steps.",
                              number_text(steps.value_or(0))));
  }
  items += bottleneck_words(opt_object(run.j, "bottleneck"), "");
  if (const json* cj = opt_object(run.j, "compute")) items += compute_words(*cj);
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

std::string train_decision(const Run& run) {
  const json& j = run.j;
  const auto micro = opt_number(j, "micro_batch", ""), acc = opt_number(j, "accumulation", "");
  const auto global = opt_number(j, "global_batch", ""), world = opt_number(j, "world_size", "");
  const auto sps = opt_number(j, "samples_per_s", "");
  std::string lead = fmt::format("Trained at micro-batch <b>{}</b> x {} accumulation{} = global batch <b>{}</b>",
                                 number_text(micro.value_or(0)), number_text(acc.value_or(1)),
                                 world && *world > 1 ? fmt::format(" x {} ranks", number_text(*world)) : "",
                                 number_text(global.value_or(0) * std::max(1.0, world.value_or(1))));
  if (sps) lead += fmt::format(": {:.1f} samples/s", *sps);
  std::string items;
  {
    std::string s = fmt::format("<b>Ran</b> {} steps, {} samples ({:.2f} epochs)",
                                number_text(opt_number(j, "steps", "").value_or(0)),
                                number_text(opt_number(j, "samples_seen", "").value_or(0)),
                                opt_number(j, "epochs", "").value_or(0));
    if (const auto l = opt_number(j, "final_train_loss", "")) s += fmt::format("; final train loss {:.4f}", *l);
    for (const char* split : {"test", "val"}) {
      const auto acc_v = opt_number(j, fmt::format("final_{}_accuracy", split).c_str(), "");
      if (acc_v) s += fmt::format("; {} accuracy {:.2f} %", split, 100.0 * *acc_v);
    }
    items += li(s + ".");
  }
  if (j.contains("oom_backoffs") && j["oom_backoffs"].is_array()) {
    const size_t n = j["oom_backoffs"].size();
    items += li(n == 0 ? std::string("<b>No out-of-memory back-off</b>: the micro-batch fit throughout.")
                       : fmt::format("<b>{} out-of-memory back-off(s)</b>: the micro-batch was halved and the "
                                     "accumulation doubled; <code>`micro_batch` auto</code> searches a micro-batch that fits "
                                     "from the start.",
                                     n));
  }
  if (const json* in = opt_object(j, "interrupted"))
    items += li(fmt::format("<b>Interrupted</b> by {}.", esc(opt_string(*in, "signal"))));
  if (const json* o = opt_object(j, "objective")) {
    const std::string reason = opt_string(*o, "reason");
    if (!reason.empty()) items += li(fmt::format("<b>Objective {}</b>: {}.", esc(opt_string(*o, "objective")), esc(reason)));
  }
  items += bottleneck_words(opt_object(j, "bottleneck"), "");
  if (const auto mfu = opt_number(j, "mfu", ""); mfu && opt_number(j, "achieved_flops_per_s", ""))
    items += compute_words(j);
  if (const json* leak = opt_object(j, "leak"); leak && leak->value("detected", false))
    items += li(fmt::format("<b>Memory grows</b> by {} per step from step {}.",
                            bytes(opt_number(*leak, "bytes_per_step", "leak").value_or(0)),
                            number_text(opt_number(*leak, "first_step", "leak").value_or(0))));
  return "<p class=\"lead\">" + lead + ".</p>\n<ul>\n" + items + "</ul>\n";
}

}  // namespace saturate::html

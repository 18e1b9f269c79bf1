#include "saturate/report/train_summary.h"

#include <algorithm>

#include "saturate/report/report.h"

namespace saturate {

TrainAdaptiveSummary adaptive_summary(const AdaptiveBatch& a, int64_t base_batch, int64_t max_units, LrRule rule) {
  TrainAdaptiveSummary s;
  s.base_batch = base_batch;
  s.max_global_batch = max_units * base_batch;
  s.global_batch = a.global_batch();
  s.micro_batch = a.micro_batch();
  s.lr_gain = a.lr_gain();
  s.lr_rule = rule;
  s.changes = a.changes();
  s.step_comm_ms = a.step_comm_ms();
  return s;
}

nlohmann::json TrainCompute::to_json() const {
  nlohmann::json j = {{"flops_per_sample", flops_per_sample}, {"flops_method", "counted"},
                      {"achieved_flops_per_s", achieved_flops_per_s}, {"peak_flops_per_s", peak_flops_per_s},
                      {"peak_method", peak_method}};
  j["mfu"] = mfu ? nlohmann::json(*mfu) : nlohmann::json();
  if (!mfu_note.empty()) j["mfu_note"] = mfu_note;
  if (analytic_flops_per_sample) j["analytic_flops_per_sample"] = *analytic_flops_per_sample;
  return j;
}

namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json adaptive_json(const TrainAdaptiveSummary& a) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : a.changes)
    changes.push_back({{"step", c.step},
                       {"old_global_batch", c.old_units * a.base_batch},
                       {"new_global_batch", c.new_units * a.base_batch},
                       {"noise_scale", c.noise_scale},
                       {"goodput_gain", c.goodput_gain}});
  return {{"base_batch", a.base_batch},     {"max_global_batch", a.max_global_batch},
          {"global_batch", a.global_batch}, {"micro_batch", a.micro_batch},
          {"lr_gain", a.lr_gain},           {"lr_rule", to_string(a.lr_rule)},
          {"changes", changes},             {"step_comm_ms", a.step_comm_ms}};
}


/// The trainer's own result: the batch, the steps, the losses, the back-offs and checkpoints.
nlohmann::json result_json(const TrainResult& r) {
  nlohmann::json backoffs = nlohmann::json::array();
  for (const auto& b : r.oom_backoffs)
    backoffs.push_back({{"step", b.step}, {"old_micro_batch", b.old_micro_batch}, {"new_micro_batch", b.new_micro_batch}});
  nlohmann::json eval_backoffs = nlohmann::json::array();
  for (const auto& b : r.eval_oom_backoffs)
    eval_backoffs.push_back({{"step", b.step}, {"old_eval_chunk", b.old_micro_batch}, {"new_eval_chunk", b.new_micro_batch}});
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : r.evals)
    evals.push_back({{"step", e.step}, {"samples", e.samples}, {"train_seconds", e.train_seconds}, {"loss", e.loss},
                     {"accuracy", e.accuracy}});
  return {{"micro_batch", r.micro_batch},
          {"accumulation", r.accumulation},
          {"global_batch", r.global_batch},
          {"steps", r.steps},
          {"samples_seen", r.samples_seen},
          {"epochs", r.epochs},
          {"final_train_loss", r.final_train_loss},
          {"samples_per_s", r.samples_per_s},
          {"oom_backoffs", backoffs},
          {"eval_oom_backoffs", eval_backoffs},
          {"skipped_steps", r.skipped_steps},
          {"checkpoints_written", r.checkpoints_written},
          {"checkpoints_failed", r.checkpoints_failed},
          {"checkpoint_error", r.checkpoint_error.empty() ? nlohmann::json() : nlohmann::json(r.checkpoint_error)},
          {"resumed_from", r.resumed_from ? nlohmann::json(*r.resumed_from) : nlohmann::json()},
          {"resumed_split", r.resumed_from ? nlohmann::json{{"world_size", r.resumed_world_size},
                                                            {"shares", r.resumed_shares.empty()
                                                                           ? nlohmann::json()
                                                                           : nlohmann::json(r.resumed_shares)}}
                                           : nlohmann::json()},
          {"losses", r.losses},
          {"evals", evals},
          {"reached_accuracy", r.reached_accuracy}};
}

/// A batch search the run made (its trials as search's JSON has them: the report draws them).
nlohmann::json search_json(const SearchResult& r) {
  nlohmann::json trials = nlohmann::json::array();
  for (const Trial& t : r.trials) trials.push_back(trial_json(t));
  return {{"max_batch", r.max_batch},         {"max_batch_exact", r.max_batch_exact},
          {"capped", r.capped},               {"recommended_batch", r.recommended_batch},
          {"trials", trials},                 {"trial_steps", r.trial_steps},
          {"search_seconds", r.search_seconds}};
}

}  // namespace

nlohmann::json TrainSummary::to_json() const {
  const TrainResult& r = result;
  nlohmann::json j = context_json(context);
  j.update(result_json(r));
  j.update({{"data", data}, {"precision", precision}, {"checkpointing", checkpointing}, {"leak", leak_json(leak)}});
  j["leak"]["sites"] = leak_sites_json(leak_sites);  // filled a few steps after a detection
  // the held-out split's results under its own name: "test" fills final_test_*, "val" final_val_*
  j.update({{"eval_split", eval_split.empty() ? nlohmann::json() : nlohmann::json(eval_split)},
            {"final_test_loss", nullptr},
            {"final_test_accuracy", nullptr},
            {"final_val_loss", nullptr},
            {"final_val_accuracy", nullptr}});
  j["eval_batch"] = eval_batch > 0 ? nlohmann::json(eval_batch) : nlohmann::json();
  j["workers"] = workers;
  j["workers_auto"] = workers_auto ? workers_auto->to_json() : nlohmann::json();
  j["eval_batch_search"] = eval_search ? search_json(*eval_search) : nlohmann::json();
  j["batch_search"] = nullptr;
  if (batch_search) {
    j["batch_search"] = search_json(*batch_search);
    j["batch_search"]["sized_at_tokens"] =
        batch_search_tokens > 0 ? nlohmann::json(batch_search_tokens) : nlohmann::json();
  }
  if (!eval_split.empty()) {
    j["final_" + eval_split + "_loss"] = optional_json(r.final_test_loss);
    j["final_" + eval_split + "_accuracy"] = optional_json(r.final_test_accuracy);
  }
  if (monitor) j.update(saturate::to_json(*monitor));  // phases_ms, utilization, bottleneck, monitor_overhead
  j["fast_paths"] = fast_paths;
  j["loss_every"] = loss_every;
  if (objective) j["objective"] = saturate::to_json(*objective);
  if (adaptive) j["adaptive"] = adaptive_json(*adaptive);
  j["interrupted"] = nullptr;
  if (interrupted)
    j["interrupted"] = {{"signal", interrupted->signal},
                        {"exit_status", interrupted->exit_status},
                        {"after_step", interrupted->after_step},
                        {"checkpoint", interrupted->checkpoint.empty() ? nlohmann::json()
                                                                       : nlohmann::json(interrupted->checkpoint)}};
  if (noise)
    j["gradient_noise_scale"] = {{"value", optional_json(noise->value)},
                                 {"gradient_sq_norm", noise->gradient_sq_norm},
                                 {"trace_covariance", noise->trace_covariance},
                                 {"measurements", noise->measurements}};
  if (compute) j.update(compute->to_json());
  return j;
}

}  // namespace saturate

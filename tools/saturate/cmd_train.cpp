// saturate train: train with the found settings on real data (the run is the library's
// run_train_session, session/train_session.h; here: flags, progress lines, the summary).
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "data_flags.h"
#include "dist_flags.h"
#include "monitor_flags.h"
#include "objective_flags.h"
#include "step_flags.h"
#include "saturate/core/errors.h"
#include "saturate/core/stop_signals.h"
#include "saturate/core/units.h"
#include "saturate/report/progress_lines.h"
#include "saturate/session/train_session.h"
#include "saturate/report/train_text.h"

namespace saturate::cli {
namespace {

struct TrainFlags {
  std::string html;
  std::string batch = "64", max_tokens = "0", eval_batch = "0";
  TrainSessionOptions o;  // the flags fill the library's options; its defaults are the flags'
  std::string lr_schedule = "constant";
  std::string lr_scaling = "auto";
  std::string resume;
  std::string save;
  std::string profile_ops;
  bool no_backoff = false;
  int64_t log_every = 50;
  bool quiet = false;
};

void add_train_flags(CLI::App& cmd, TrainFlags& tf, StepSettings& step) {
  add_option_flag(cmd, "micro_batch", tf.batch);
  add_option_flag(cmd, "train.target_fraction", tf.o.target_fraction);
  add_option_flag(cmd, "accumulation", tf.o.accumulation);
  add_option_flag(cmd, "global_batch", tf.o.global_batch);
  add_option_flag(cmd, "epochs", tf.o.epochs);
  add_option_flag(cmd, "max_steps", tf.o.max_steps);
  add_option_flag(cmd, "adaptive", tf.o.adaptive);
  add_option_flag(cmd, "adapt_every", tf.o.adapt_every);
  add_option_flag(cmd, "adaptive_max", tf.o.adaptive_max);
  add_option_flag(cmd, "no_oom_backoff", tf.no_backoff);
  add_option_flag(cmd, "lr_schedule", tf.lr_schedule);
  add_option_flag(cmd, "warmup_steps", tf.o.warmup_steps);
  add_option_flag(cmd, "lr_scaling", tf.lr_scaling);
  add_option_flag(cmd, "base_batch", tf.o.base_batch);
  add_option_flag(cmd, "clip_grad_norm", step.clip_grad_norm);
  add_option_flag(cmd, "noise_scale", tf.o.noise_scale);
}

void add_eval_and_output_flags(CLI::App& cmd, TrainFlags& tf) {
  add_option_flag(cmd, "eval_every_samples", tf.o.eval_every_samples);
  add_option_flag(cmd, "stop_at_accuracy", tf.o.stop_at_accuracy);
  add_option_flag(cmd, "eval_batch", tf.eval_batch);
  add_option_flag(cmd, "max_tokens", tf.max_tokens);
  add_option_flag(cmd, "checkpoint_dir", tf.o.checkpoint_dir);
  add_option_flag(cmd, "checkpoint_every", tf.o.checkpoint_every);
  add_option_flag(cmd, "resume", tf.resume);
  add_option_flag(cmd, "save", tf.save);
  add_option_flag(cmd, "log_every", tf.log_every);
  add_option_flag(cmd, "loss_every", tf.o.loss_every);
  add_option_flag(cmd, "profile_ops", tf.profile_ops);
  add_option_flag(cmd, "quiet", tf.quiet);
  add_html_flag(cmd, tf.html);
}

/// The flags as the library's options, checked (usage errors before any device work).
TrainSessionOptions train_options(TrainFlags& tf, const ObjectiveFlags& objective, const StepSettings& step,
                                  uint64_t seed, const TrainRanks& ranks) {
  TrainSessionOptions o = tf.o;
  parse_batch_options(o, tf.batch, tf.max_tokens, tf.eval_batch);
  o.lr_decay = parse_lr_decay(tf.lr_schedule);
  if (tf.lr_scaling != "auto") o.lr_scaling = parse_lr_scaling(tf.lr_scaling);
  o.objective = objective_options(objective);
  o.step = step.footprint();
  o.oom_backoff = !tf.no_backoff;
  resume_from(o, tf.resume);
  o.profile_ops = !tf.profile_ops.empty();
  o.seed = seed;
  o.check();
  check_batch_request(batch_request(o, ranks));  // errors name --batch, --accumulate, --global-batch
  return o;
}

/// The summary: JSON on stdout (--json -) or the text and --json FILE; --html.
void write_summary(const TrainSessionResult& r, const WorkloadFlags& flags, const TrainFlags& tf) {
  const nlohmann::json j = r.to_json();
  if (flags.json != "-") std::cout << with_flags(r.to_text());
  if (!flags.json.empty()) write_json(j, flags.json, std::cout);
  write_html_report(j, tf.html);
}

struct TrainCommand {
  WorkloadFlags flags;
  DataOptions data;
  TrainFlags tf;
  MonitorSettings monitor;
  DistFlags dist;
  StepSettings step;
  ObjectiveFlags objective;
};

int run_train(TrainCommand& c) {
  // SIGINT, SIGTERM, SIGHUP: finish the step, checkpoint, summary, exit 128 + the signal
  const StopSignals stop_signals({"stopping after the current step (a final checkpoint with --checkpoint-dir)"});
  // several ranks (saturate launch, torchrun): global batch = micro x accumulation x world size
  TrainRanks ranks = prepare_train_ranks(c.dist, c.flags, c.step);
  TrainSessionOptions o = train_options(c.tf, c.objective, c.step, c.flags.o.model.seed, ranks);
  o.stop = &stop_signals.received();
  const bool tokens = trains_on_tokens(c.data, c.flags.o.model);
  byte_level_vocab(c.data, c.flags.o.model);
  OpenedData opened;
  auto session = open_session(c.flags, tokens ? nullptr : &c.data, &opened);
  ranks.connect(session->device);  // several ranks: the process group
  o.monitor = c.monitor.on(session->device);
  Workload& workload = *session->workload;
  const bool quiet = c.tf.quiet || !ranks.writer();  // rank 0 reports
  std::string no_eval;
  TrainSessionData d = train_session_data(c.data, opened, tokens, workload.built().spec.seq_len, no_eval);
  if (!no_eval.empty() && !quiet) print_line("saturate: " + no_eval);
  const TrainEvents events = train_progress_lines(
      print_line, [](const std::string& w) { print_line("saturate: warning: " + w); },
      train_lines_style(o, session->context, c.tf.log_every), d.eval_split(), quiet);
  const TrainSessionResult r =
      run_train_session(workload, *session->meter, session->context, std::move(d), o, ranks, events);
  const TrainResult& result = r.summary.result;
  if (r.op_profile && ranks.writer()) write_json(r.op_profile_json(), c.tf.profile_ops, std::cout);
  const int exit_status = result.stopped_by_signal ? 128 + result.stopped_by_signal : 0;
  if (!ranks.writer()) return exit_status;  // rank 0 writes the model and the summary
  // an interrupted run's weights are not the trained model --save names: its checkpoint has them
  if (!c.tf.save.empty() && !result.stopped_by_signal) save_model(workload.model(), c.tf.save);
  write_summary(r, c.flags, c.tf);
  const std::string saved = result.stopped_by_signal ? "" : c.tf.save;
  if (auto lost = checkpoint_failure_text(result, o.checkpoint_dir, {{"save", saved}, {"json", c.flags.json}}); !lost.empty())
    throw RuntimeFailure(lost);
  return exit_status;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train on real data with the found settings (accumulation, mixed precision, "
                                          "activation checkpointing, OOM back-off, exact resume)");
  auto c = std::make_shared<TrainCommand>();
  add_workload_flags(*cmd, c->flags);
  c->flags.o.threads_from_load = false;  // training keeps LibTorch's threads: one command, the same bits
  c->data.data = "fashion-mnist";  // before the flags: --help shows these defaults
  c->data.workers = "2";
  add_data_flags(*cmd, c->data);
  add_dist_flags(*cmd, c->dist, /*search=*/false);  // --backend, --dist-timeout, --bucket-mb, --parallel
  add_monitor_flags(*cmd, c->monitor);
  add_step_flags(*cmd, c->step);  // --precision, --checkpointing, --fast-paths
  c->step.train = true;
  add_train_flags(*cmd, c->tf, c->step);
  add_objective_flags(*cmd, c->objective, /*base_batch_flag=*/false);
  add_eval_and_output_flags(*cmd, c->tf);
  cmd->callback([c, &action] { action = [c]() { return run_train(*c); }; });
}

}  // namespace saturate::cli

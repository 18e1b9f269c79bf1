// saturate train: train with the found settings on real data (the run is the library's
// run_train_session, session/train_session.h; here: flags, progress lines, the summary).
#include <iostream>
#include <limits>

#include <fmt/format.h>

#include "commands.h"
#include "data_flags.h"
#include "dist_flags.h"
#include "flag_checks.h"
#include "html_flag.h"
#include "monitor_flags.h"
#include "objective_flags.h"
#include "step_flags.h"
#include "stop_signals.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"
#include "saturate/report/train_text.h"
#include "saturate/session/train_session.h"
#include "saturate/train/eta.h"
#include "saturate/train/token_data.h"

namespace saturate::cli {
namespace {

struct TrainFlags {
  std::string html;
  std::string batch = "64";
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

void add_batch_flags(CLI::App& cmd, TrainFlags& tf) {
  cmd.add_option("--batch,-b", tf.batch, "micro-batch (samples per forward/backward), or auto: the largest that "
                                         "trains, searched with the step, data and evaluation training will run")
      ->capture_default_str();
  cmd.add_option("--target-memory", tf.o.target_fraction,
                 "with --batch auto: the fraction of the budget the micro-batch's measured peak may use (default 1.0 "
                 "on CPU, where the budget is exact; 0.95 on CUDA, for fragmentation)")
      ->check(in_range(0.01, 1, "a fraction of the budget, e.g. 0.9"));
  cmd.add_option("--accumulate", tf.o.accumulation, "micro-batches per optimizer step (default 1)")
      ->check(in_range(1, 1e6, "micro-batches per optimizer step"));
  cmd.add_option("--global-batch", tf.o.global_batch, "samples per optimizer step; --accumulate follows from it")
      ->check(in_range(1, 2147483647.0, "samples per optimizer step"));
  cmd.add_option("--epochs", tf.o.epochs, "passes over the data")
      ->check(in_range(0, 1e6, "0: give --optimizer-steps"))->capture_default_str();
  cmd.add_option("--optimizer-steps,--steps", tf.o.max_steps,
                 "optimizer steps to train (overrides --epochs; 0: use --epochs)")
      ->check(in_range(0, 1e12, "0: use --epochs"));
  cmd.add_flag("--adaptive", tf.o.adaptive,
               "re-choose the global batch (in units of --base-batch) and the learning rate during training by "
               "goodput, from the gradient noise scale measured every step and the throughput curve timed at the "
               "start (Pollux); --batch is the largest micro-batch (or auto)");
  cmd.add_option("--adapt-every", tf.o.adapt_every, "with --adaptive: re-decide every N optimizer steps")
      ->check(in_range(1, 1e9, "optimizer steps"))->capture_default_str();
  cmd.add_option("--adaptive-max", tf.o.adaptive_max,
                 "with --adaptive: the global batch grows to at most N x --base-batch")
      ->check(in_range(1, 1024, "times --base-batch"))->capture_default_str();
  cmd.add_flag("--no-oom-backoff", tf.no_backoff, "fail on OOM instead of halving the micro-batch");
}

void add_schedule_flags(CLI::App& cmd, TrainFlags& tf) {
  cmd.add_option("--lr-schedule", tf.lr_schedule, "constant | cosine | step (x0.1 every epoch)")->capture_default_str();
  cmd.add_option("--lr-warmup-steps,--warmup-steps", tf.o.warmup_steps, "optimizer steps of linear learning-rate warm-up")
      ->check(in_range(0, 1e12, "optimizer steps"))->capture_default_str();
  cmd.add_option("--lr-scaling", tf.lr_scaling,
                 "linear | sqrt | none: rescale --lr from --base-batch to the global batch (seed B9); auto: with "
                 "--objective goodput and --adaptive the noise scale's rule (AdaScale's gain for sgd, its square root "
                 "for adam/adamw), none otherwise")
      ->capture_default_str();
  cmd.add_option("--base-batch", tf.o.base_batch,
                 "the global batch --lr was tuned for (with --lr-scaling, --objective goodput and --adaptive; default "
                 "64 for the last two)")
      ->check(in_range(1, 2147483647.0, "a global batch"));
  cmd.add_option("--clip-grad-norm", tf.o.clip_grad_norm, "clip the global gradient norm (0: off)")
      ->check(in_range(0, 1e12, "a gradient norm; 0: no clipping"));
  cmd.add_flag("--noise-scale", tf.o.noise_scale,
               "measure the gradient noise scale every step (the first micro-batch's gradient against the step's; a "
               "step of one micro-batch runs as two halves), smoothed over about 20 steps, in the progress lines "
               "and the summary");
}

void add_eval_and_output_flags(CLI::App& cmd, TrainFlags& tf) {
  cmd.add_option("--eval-every-samples", tf.o.eval_every_samples,
                 "evaluate every N training samples too (0: at epoch ends only); the summary lists each evaluation "
                 "with its training time")
      ->check(in_range(0, 1e15, "samples; 0: at epoch ends only"))->capture_default_str();
  cmd.add_option("--stop-at-accuracy", tf.o.stop_at_accuracy,
                 "stop after the evaluation that reaches this accuracy (0: never), e.g. 0.85")
      ->check(in_range(0, 1, "an accuracy; 0: never stop early"));
  cmd.add_option("--eval-batch", tf.o.eval_batch, "evaluation batch (default 4x the micro-batch; no gradients kept)")
      ->check(in_range(1, 2147483647.0, "samples per evaluation batch"));
  cmd.add_option("--checkpoint-dir", tf.o.checkpoint_dir, "write checkpoints here (atomically)");
  cmd.add_option("--checkpoint-every", tf.o.checkpoint_every, "also every N steps (default: each epoch end)")
      ->check(in_range(0, 1e12, "optimizer steps; 0: at epoch ends"));
  cmd.add_option("--resume", tf.resume, "continue from the checkpoint in DIR (and keep writing there)");
  cmd.add_option("--save", tf.save, "write the trained model to FILE");
  cmd.add_option("--log-every", tf.log_every, "progress line every N steps on stderr")
      ->check(in_range(1, 1e12, "optimizer steps"))->capture_default_str();
  cmd.add_option("--loss-every", tf.o.loss_every,
                 "read the loss back from the device every N steps (each read is a sync that stops the host from "
                 "queueing work ahead; 1: every step)")
      ->check(in_range(1, 1e12, "optimizer steps; 1: every step"))->capture_default_str();
  cmd.add_option("--profile-ops", tf.profile_ops,
                 "write an operator profile of the run (LibTorch's profiler: calls, self and total ms per op, per "
                 "step) to FILE as JSON; it slows each op a little");
  cmd.add_flag("--quiet,-q", tf.quiet, "no progress lines");
  add_html_flag(cmd, tf.html);
}

/// --batch: a micro-batch in 1..2^31-1, or auto (0).
int64_t parse_micro_batch(const std::string& text) {
  if (text == "auto") return 0;
  int64_t micro = 0;
  try {
    size_t used = 0;
    micro = std::stoll(text, &used);
    if (used != text.size()) micro = 0;
  } catch (const std::exception&) {
    micro = 0;
  }
  if (micro <= 0 || micro > std::numeric_limits<int32_t>::max())
    throw UsageError(fmt::format("--batch: '{}' is not a micro-batch in 1..{} or auto", text,
                                 std::numeric_limits<int32_t>::max()));
  return micro;
}

/// --val-fraction for tokens:FILE: the held-out end of the text (default 0.1, so that a language
/// model is evaluated on text it never trained on).
double token_val_fraction(const std::string& arg) {
  if (arg == "0") return 0.1;
  try {
    size_t used = 0;
    const double f = std::stod(arg, &used);
    if (used == arg.size()) return f;
  } catch (const std::exception&) {
  }
  throw UsageError(fmt::format("--val-fraction: '{}' is not a number; give a fraction in [0, 1) such as 0.1", arg));
}

/// The flags as the library's options, checked (usage errors before any device work).
TrainSessionOptions train_options(TrainFlags& tf, const ObjectiveFlags& objective, const StepFlags& step,
                                  uint64_t seed, int world) {
  TrainSessionOptions o = tf.o;
  o.micro_batch = parse_micro_batch(tf.batch);
  o.lr_decay = parse_lr_decay(tf.lr_schedule);
  if (tf.lr_scaling != "auto") o.lr_scaling = parse_lr_scaling(tf.lr_scaling);
  o.objective = objective_options(objective);
  o.step = step_footprint(step);
  o.oom_backoff = !tf.no_backoff;
  if (!tf.resume.empty() && !o.checkpoint_dir.empty() && tf.resume != o.checkpoint_dir)
    throw UsageError(fmt::format("--resume {} and --checkpoint-dir {} differ; a resumed run keeps writing where it "
                                 "resumed from",
                                 tf.resume, o.checkpoint_dir));
  if (!tf.resume.empty()) o.checkpoint_dir = tf.resume;
  o.resume = !tf.resume.empty();
  o.profile_ops = !tf.profile_ops.empty();
  o.seed = seed;
  o.check();
  BatchRequest request{o.micro_batch, o.accumulation, o.global_batch, world};
  check_batch_request(request);  // errors name --batch, --accumulate, --global-batch
  if (!tf.save.empty()) check_output_path(tf.save, {"--save", "model.pt"});  // before the training
  return o;
}

/// The progress lines on stderr (none with -q and on ranks other than 0).
TrainEvents progress_lines(const Session& session, const TrainFlags& tf, const TrainSessionOptions& o,
                           const std::string& eval_split, bool quiet) {
  TrainEvents e;
  e.on_warning = [](const std::string& w) { std::cerr << "saturate: warning: " << w << "\n"; };
  if (quiet) return e;
  const std::string objective = to_string(o.objective.objective);
  const int64_t base_batch = o.base_batch > 0 ? o.base_batch : 64;
  e.objective = objective_progress_lines;
  e.on_trial = [](const Trial& t) { std::cerr << trial_line(t) << std::endl; };
  e.on_auto_batch = [](const AutoBatch& a) { std::cerr << fmt::format("saturate: --batch auto: {}\n", a.reason); };
  e.on_objective = [objective](const ObjectiveOutcome& o) {
    std::cerr << "saturate: --objective " << objective << ": " << o.reason << "\n";
  };
  e.on_adaptive_curve = [](int64_t micro) {
    std::cerr << fmt::format("saturate: --adaptive: timing samples/s at log-spaced batches up to {}\n", micro);
  };
  e.on_adaptive_start = [&tf](int64_t global, int64_t micro) {
    std::cerr << fmt::format("saturate: --adaptive: starting at global batch {} (micro-batch {}), growing to at most "
                             "{} by goodput every {} steps\n",
                             global, micro, global * tf.o.adaptive_max, tf.o.adapt_every);
  };
  e.on_start = [&session, precision = to_string(o.step.precision),
                checkpointing = to_string(o.step.checkpointing)](const TrainStart& s) {
    std::cerr << fmt::format("saturate: training {} on {} ({}), micro-batch {} x {} = global batch {}, {} steps ({} "
                             "per epoch), {} {}, lr {:g}\n",
                             session.context.model_name, s.data, session.context.device_info, s.micro_batch,
                             s.world_size > 1 ? fmt::format("{} x {} ranks", s.accumulation, s.world_size)
                                              : std::to_string(s.accumulation),
                             s.global_batch, s.total_steps, s.steps_per_epoch, precision, checkpointing,
                             s.peak_lr);
  };
  e.on_step = [every = std::max<int64_t>(1, tf.log_every)](const TrainProgress& p) {
    if (p.step % every != 0 && p.step != p.total_steps) return;
    std::string noise;
    if (p.noise_measured)
      noise = p.noise_scale ? fmt::format("  noise scale {:.0f}", *p.noise_scale) : std::string("  noise scale -");
    std::string pace;  // the recent pace and the time left at it
    if (p.steps_per_s)
      pace = p.step < p.total_steps
                 ? fmt::format("  {:.3g} steps/s  ETA {}", *p.steps_per_s, format_duration(*p.seconds_left))
                 : fmt::format("  {:.3g} steps/s", *p.steps_per_s);
    std::cerr << fmt::format("  step {:>6}/{}  loss {:.4f}  lr {:.3g}{}{}{}\n", p.step, p.total_steps, p.loss, p.lr,
                             pace, noise, p.monitor_status.empty() ? std::string() : "  " + p.monitor_status);
  };
  e.on_eval = [eval_split](int64_t epoch, double loss, double acc) {
    std::cerr << fmt::format("  epoch {} {} loss {:.4f} accuracy {:.2f} %\n", epoch, eval_split, loss, 100.0 * acc);
  };
  e.on_adapt = [base_batch](const AdaptiveChange& c, int64_t micro, double lr_gain) {
    std::cerr << fmt::format("saturate: --adaptive: from step {}: noise scale {:.0f} -> global batch {} -> {} "
                             "(goodput x{:.2f}), micro-batch {}, learning rate x{:.2f} of the base\n",
                             c.step, c.noise_scale, c.old_units * base_batch, c.new_units * base_batch, c.goodput_gain,
                             micro, lr_gain);
  };
  e.on_backoff = [](int64_t step, int64_t old_micro, int64_t new_micro) {
    std::cerr << fmt::format("saturate: out of memory at step {}: micro-batch {} -> {}, accumulation doubled, global "
                             "batch unchanged; redoing the step\n",
                             step, old_micro, new_micro);
  };
  return e;
}

/// Token models read language-model data (tokens:FILE, synthetic); image models the loader's
/// (--seq-len or --vocab make a TorchScript file a token model, as resolve_model_spec does).
bool is_token_model(const WorkloadFlags& f) { return f.tokens || f.model == "gpt" || f.seq_len > 0 || f.vocab > 0; }
bool trains_on_tokens(const DataFlags& data, const WorkloadFlags& f) {
  return is_token_data(data.data) || (is_token_model(f) && data.data == "synthetic");
}

/// What to train on: token text (tokens:FILE with its held-out end, or synthetic tokens) or the
/// loader's samples with the data's test split or the samples --val-fraction holds out.
TrainSessionData train_data(const DataFlags& data, bool tokens, int64_t seq_len, bool quiet) {
  TrainSessionData d;
  d.tokens = tokens;
  d.workers = data.workers == "auto" ? 2 : std::stoi(data.workers);
  d.prefetch = data.prefetch;
  d.skip_bad_samples = data.skip_bad_samples;
  d.augment = !data.no_augment;
  if (tokens) {
    if (is_token_data(data.data))
      d.corpus = read_token_corpus(data.data.substr(7), token_val_fraction(data.val_fraction_arg), seq_len);
    return d;
  }
  d.train = data.dataset;
  HeldOut held_out = open_held_out(data.data, data.val_fraction, data.skip_bad_samples);
  d.held_out = std::move(held_out.dataset);
  d.held_out_split = held_out.split;
  if (!d.held_out && !quiet) std::cerr << "saturate: " << with_flags(held_out.note) << "\n";
  return d;
}

/// The summary: JSON on stdout (--json -) or the text and --json FILE; --html.
void write_summary(const TrainSessionResult& r, const WorkloadFlags& flags, const TrainFlags& tf) {
  if (flags.json == "-") {
    write_json(r.json, "-", std::cout);
  } else {
    std::cout << with_flags(train_summary_text(r.json));
    if (!flags.json.empty()) write_json(r.json, flags.json, std::cout);
  }
  write_html_report(r.json, tf.html);
}

struct TrainCommand {
  WorkloadFlags flags;
  DataFlags data;
  TrainFlags tf;
  MonitorFlags monitor;
  DistFlags dist;
  StepFlags step;
  ObjectiveFlags objective;
};

int run_train(TrainCommand& c) {
  check_html_path(c.tf.html);
  // SIGINT, SIGTERM, SIGHUP: finish the step, checkpoint, summary, exit 128 + the signal
  const StopSignals stop_signals("stopping after the current step (a final checkpoint with --checkpoint-dir)");
  // several ranks (saturate launch, torchrun): global batch = micro x accumulation x world size
  TrainRanks ranks = prepare_train_ranks(c.dist, c.flags);
  TrainSessionOptions o = train_options(c.tf, c.objective, c.step, c.flags.seed, ranks.world_size());
  o.stop = &stop_signals.received();
  const bool tokens = trains_on_tokens(c.data, c.flags);
  if (tokens && !is_token_model(c.flags))
    throw UsageError(fmt::format("--data {}: token data feeds token models (gpt, or a TorchScript file with "
                                 "--tokens); {} takes images",
                                 c.data.data, c.flags.model));
  const WorkloadFlags wf = tokens ? c.flags : with_data_shape(c.data, c.flags);
  auto session = open_session(wf);
  ranks.connect(session->device);  // several ranks: the process group
  o.monitor = monitor_options(c.monitor, session->device);
  Workload& workload = *session->workload;
  const bool quiet = c.tf.quiet || !ranks.writer();  // rank 0 reports
  TrainSessionData d = train_data(c.data, tokens, workload.built().spec.seq_len, quiet);
  const TrainEvents events = progress_lines(*session, c.tf, o, d.eval_split(), quiet);
  const TrainSessionResult r =
      run_train_session(workload, *session->meter, session->context, std::move(d), o, ranks, events);
  const TrainResult& result = r.summary.result;
  if (!r.op_profile.is_null() && ranks.writer()) write_json(r.op_profile, c.tf.profile_ops, std::cout);
  const int exit_status = result.stopped_by_signal ? 128 + result.stopped_by_signal : 0;
  if (!ranks.writer()) return exit_status;  // rank 0 writes the model and the summary
  // an interrupted run's weights are not the trained model --save names: its checkpoint has them
  if (!c.tf.save.empty() && !result.stopped_by_signal) save_model(workload.model(), c.tf.save);
  write_summary(r, wf, c.tf);
  return exit_status;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train on real data with the found settings (accumulation, mixed precision, "
                                          "activation checkpointing, OOM back-off, exact resume)");
  auto c = std::make_shared<TrainCommand>();
  add_workload_flags(*cmd, c->flags);
  c->data.data = "fashion-mnist";  // before the flags: --help shows these defaults
  c->data.workers = "2";
  add_data_flags(*cmd, c->data);
  add_dist_flags(*cmd, c->dist, /*search=*/false);  // --backend, --dist-timeout, --bucket-mb, --parallel
  add_monitor_flags(*cmd, c->monitor);
  add_step_flags(*cmd, c->step);  // --precision, --checkpointing
  add_batch_flags(*cmd, c->tf);
  add_schedule_flags(*cmd, c->tf);
  add_objective_flags(*cmd, c->objective, /*base_batch_flag=*/false);
  add_eval_and_output_flags(*cmd, c->tf);
  cmd->callback([c, &action] { action = [c]() { return run_train(*c); }; });
}

}  // namespace saturate::cli

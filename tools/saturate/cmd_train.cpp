// saturate train: train with the found settings on real data.
#include <cmath>
#include <iostream>
#include <limits>

#include <fmt/format.h>

#include "commands.h"
#include "html_flag.h"
#include "flag_checks.h"
#include "data_flags.h"
#include "dist_flags.h"
#include "monitor_flags.h"
#include "step_flags.h"
#include "stop_signals.h"
#include "objective_flags.h"
#include "saturate/monitor/op_profile.h"
#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"
#include "saturate/memory/leak_check.h"
#include "saturate/probe/probe.h"
#include "saturate/search/search.h"
#include "saturate/session/objective_session.h"
#include "saturate/session/train_summary.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/report/train_text.h"
#include "saturate/train/eta.h"
#include "saturate/train/auto_batch.h"
#include "saturate/train/batch_plan.h"
#include "saturate/train/loader_data.h"
#include "saturate/train/token_data.h"
#include "saturate/train/trainer.h"

namespace saturate::cli {
namespace {

struct TrainFlags {
  std::string html;
  std::string batch = "64";
  int64_t accumulate = 0;
  int64_t global_batch = 0;
  int64_t epochs = 1;
  int64_t steps = 0;
  double target_memory = 0;  // 0: 1.0 on CPU (the budget is exact), 0.95 on CUDA
  std::string lr_schedule = "constant";
  int64_t warmup_steps = 0;
  std::string lr_scaling = "auto";
  int64_t base_batch = 0;
  int64_t eval_batch = 0;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  std::string resume;
  std::string save;
  std::string profile_ops;
  double clip_grad_norm = 0;
  bool no_backoff = false;
  int64_t log_every = 50;
  int64_t loss_every = 10;
  bool quiet = false;
  bool noise_scale = false;
  bool adaptive = false;
  int64_t adapt_every = 50;
  int64_t adaptive_max = 64;
  int64_t eval_every_samples = 0;
  double stop_at_accuracy = 0;
};

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

/// Batches of the training data for measuring the noise scale (--objective goodput): the data's
/// own stream at the batch asked for, in one process, without workers.
struct NoiseBatches {
  std::function<Batch(int64_t)> next;
  std::string name;
};
NoiseBatches noise_batches(const std::shared_ptr<Dataset>& dataset, bool token_data, const TokenCorpus& corpus,
                           Workload& workload, uint64_t seed, const torch::Device& device) {
  auto held = std::make_shared<std::unique_ptr<TrainData>>();
  auto step = std::make_shared<int64_t>(0);
  auto batch = std::make_shared<int64_t>(0);
  const BuiltModel& built = workload.built();
  LoaderOptions lo;
  lo.workers = 0;
  lo.seed = seed;
  lo.device = device;
  const auto& sample = built.sample_shape;
  if (sample.size() == 3) lo.shape = {sample[0], sample[1], sample[2]};
  else if (sample.size() == 2) lo.shape = {1, sample[0], sample[1]};
  lo.classes = built.classes;
  const int64_t seq_len = built.spec.seq_len, vocab = built.classes;
  NoiseBatches out;
  out.name = token_data ? (corpus.train.defined() ? std::string("the token file") : std::string("synthetic tokens"))
                        : dataset->name();
  out.next = [=, &corpus](int64_t b) {
    if (!*held || *batch != b) {
      if (token_data) {
        *held = std::make_unique<TokenTrainData>(corpus, seq_len, vocab, b, seed);
      } else {
        LoaderOptions o = lo;
        o.batch_size = b;
        *held = std::make_unique<LoaderTrainData>(dataset, o);
      }
      *batch = b;
      *step = 0;
    }
    return (*held)->batch_for_step((*step)++);
  };
  return out;
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train on real data with the found settings (accumulation, mixed precision, "
                                          "activation checkpointing, OOM back-off, exact resume)");
  auto flags = std::make_shared<WorkloadFlags>();
  auto data = std::make_shared<DataFlags>();
  auto tf = std::make_shared<TrainFlags>();
  auto mflags = std::make_shared<MonitorFlags>();
  add_workload_flags(*cmd, *flags);
  data->data = "fashion-mnist";  // before the flags: --help shows these defaults
  data->workers = "2";
  add_data_flags(*cmd, *data);
  auto distflags = std::make_shared<DistFlags>();
  add_dist_flags(*cmd, *distflags, /*search=*/false);  // --backend, --dist-timeout, --bucket-mb, --parallel
  add_monitor_flags(*cmd, *mflags);
  auto stepflags = std::make_shared<StepFlags>();
  add_step_flags(*cmd, *stepflags);  // --precision, --checkpointing
  cmd->add_option("--batch,-b", tf->batch, "micro-batch (samples per forward/backward), or auto: the largest that "
                                           "trains, searched with the step, data and evaluation training will run")
      ->capture_default_str();
  cmd->add_option("--target-memory", tf->target_memory,
                  "with --batch auto: the fraction of the budget the micro-batch's measured peak may use (default 1.0 "
                  "on CPU, where the budget is exact; 0.95 on CUDA, for fragmentation)")->check(in_range(0.01, 1, "a fraction of the budget, e.g. 0.9"));
  cmd->add_option("--accumulate", tf->accumulate, "micro-batches per optimizer step (default 1)")->check(in_range(1, 1e6, "micro-batches per optimizer step"));
  cmd->add_option("--global-batch", tf->global_batch, "samples per optimizer step; --accumulate follows from it")->check(in_range(1, 2147483647.0, "samples per optimizer step"));
  cmd->add_option("--epochs", tf->epochs, "passes over the data")->check(in_range(0, 1e6, "0: give --optimizer-steps"))->capture_default_str();
  cmd->add_option("--optimizer-steps,--steps", tf->steps, "optimizer steps to train (overrides --epochs; 0: use --epochs)")->check(in_range(0, 1e12, "0: use --epochs"));
  cmd->add_option("--lr-schedule", tf->lr_schedule, "constant | cosine | step (x0.1 every epoch)")->capture_default_str();
  cmd->add_option("--lr-warmup-steps,--warmup-steps", tf->warmup_steps, "optimizer steps of linear learning-rate warm-up")->check(in_range(0, 1e12, "optimizer steps"))->capture_default_str();
  cmd->add_option("--lr-scaling", tf->lr_scaling,
                  "linear | sqrt | none: rescale --lr from --base-batch to the global batch (seed B9); auto: with "
                  "--objective goodput and --adaptive the noise scale's rule (AdaScale's gain for sgd, its square root "
                  "for adam/adamw), none otherwise")
      ->capture_default_str();
  cmd->add_option("--base-batch", tf->base_batch,
                  "the global batch --lr was tuned for (with --lr-scaling, --objective goodput and --adaptive; default "
                  "64 for the last two)")->check(in_range(1, 2147483647.0, "a global batch"));
  auto objflags = std::make_shared<ObjectiveFlags>();
  add_objective_flags(*cmd, *objflags, /*base_batch_flag=*/false);
  cmd->add_flag("--adaptive", tf->adaptive,
                "re-choose the global batch (in units of --base-batch) and the learning rate during training by "
                "goodput, from the gradient noise scale measured every step and the throughput curve timed at the "
                "start (Pollux); --batch is the largest micro-batch (or auto)");
  cmd->add_option("--adapt-every", tf->adapt_every, "with --adaptive: re-decide every N optimizer steps")->check(in_range(1, 1e9, "optimizer steps"))->capture_default_str();
  cmd->add_option("--adaptive-max", tf->adaptive_max, "with --adaptive: the global batch grows to at most N x --base-batch")->check(in_range(1, 1024, "times --base-batch"))
      ->capture_default_str();
  cmd->add_option("--eval-every-samples", tf->eval_every_samples,
                  "evaluate every N training samples too (0: at epoch ends only); the summary lists each evaluation "
                  "with its training time")->check(in_range(0, 1e15, "samples; 0: at epoch ends only"))
      ->capture_default_str();
  cmd->add_option("--stop-at-accuracy", tf->stop_at_accuracy,
                  "stop after the evaluation that reaches this accuracy (0: never), e.g. 0.85")->check(in_range(0, 1, "an accuracy; 0: never stop early"));
  cmd->add_option("--eval-batch", tf->eval_batch, "evaluation batch (default 4x the micro-batch; no gradients kept)")->check(in_range(1, 2147483647.0, "samples per evaluation batch"));
  cmd->add_option("--checkpoint-dir", tf->checkpoint_dir, "write checkpoints here (atomically)");
  cmd->add_option("--checkpoint-every", tf->checkpoint_every, "also every N steps (default: each epoch end)")->check(in_range(0, 1e12, "optimizer steps; 0: at epoch ends"));
  cmd->add_option("--resume", tf->resume, "continue from the checkpoint in DIR (and keep writing there)");
  cmd->add_option("--save", tf->save, "write the trained model to FILE");
  cmd->add_option("--clip-grad-norm", tf->clip_grad_norm, "clip the global gradient norm (0: off)")->check(in_range(0, 1e12, "a gradient norm; 0: no clipping"));
  cmd->add_flag("--no-oom-backoff", tf->no_backoff, "fail on OOM instead of halving the micro-batch");
  cmd->add_option("--log-every", tf->log_every, "progress line every N steps on stderr")->check(in_range(1, 1e12, "optimizer steps"))->capture_default_str();
  cmd->add_option("--loss-every", tf->loss_every,
                  "read the loss back from the device every N steps (each read is a sync that stops the host from "
                  "queueing work ahead; 1: every step)")->check(in_range(1, 1e12, "optimizer steps; 1: every step"))
      ->capture_default_str();
  cmd->add_option("--profile-ops", tf->profile_ops,
                  "write an operator profile of the run (LibTorch's profiler: calls, self and total ms per op, per "
                  "step) to FILE as JSON; it slows each op a little");
  cmd->add_flag("--noise-scale", tf->noise_scale,
                "measure the gradient noise scale every step (the first micro-batch's gradient against the step's; a "
                "step of one micro-batch runs as two halves), smoothed over about 20 steps, in the progress lines "
                "and the summary");
  cmd->add_flag("--quiet,-q", tf->quiet, "no progress lines");
  add_html_flag(*cmd, tf->html);
  cmd->callback([=, &action] {
    action = [=]() -> int {
      check_html_path(tf->html);
      // SIGINT, SIGTERM, SIGHUP: finish the step, checkpoint, summary, exit 128 + the signal
      const StopSignals stop_signals("stopping after the current step (a final checkpoint with --checkpoint-dir)");
      TrainOptions o;
      o.stop = &stop_signals.received();
      const TrainingFootprint step_footprint_flags = step_footprint(*stepflags);
      o.precision = step_footprint_flags.precision;
      o.checkpointing = step_footprint_flags.checkpointing;
      o.fast_paths = step_footprint_flags.fast_paths;
      if (tf->loss_every < 1)
        throw UsageError(fmt::format("--loss-every: {} is not a positive number of steps; 1 reads every step's loss",
                                     tf->loss_every));
      o.loss_every = tf->loss_every;
      o.count_flops = true;
      const LrDecay decay = parse_lr_decay(tf->lr_schedule);
      const ObjectiveOptions objective_opts = objective_options(*objflags);
      const Objective objective = objective_opts.objective;
      const bool goodput_lr = tf->lr_scaling == "auto" && (objective == Objective::kGoodput || tf->adaptive);
      const LrScaling scaling = tf->lr_scaling == "auto" ? LrScaling::kNone : parse_lr_scaling(tf->lr_scaling);
      const bool auto_batch = tf->batch == "auto";
      if (objective != Objective::kMemory && !auto_batch)
        throw UsageError(fmt::format("--objective {} chooses the micro-batch: give --batch auto", objflags->objective));
      if ((objective == Objective::kGoodput || tf->adaptive) && (tf->accumulate > 0 || tf->global_batch > 0))
        throw UsageError(fmt::format("{} chooses the global batch: drop --accumulate and --global-batch (--base-batch "
                                     "is the batch the learning rate was tuned for)",
                                     tf->adaptive ? "--adaptive" : "--objective goodput"));
      if (tf->adaptive && objective != Objective::kMemory)
        throw UsageError(fmt::format("--adaptive with --objective {}: --adaptive starts at --base-batch and re-chooses "
                                     "the batch by goodput itself; drop --objective",
                                     objflags->objective));
      if (tf->adapt_every < 1)
        throw UsageError(fmt::format("--adapt-every: {} is not a positive number of steps", tf->adapt_every));
      if (tf->adaptive_max < 1 || tf->adaptive_max > 1024)
        throw UsageError(fmt::format("--adaptive-max: {} is outside 1..1024 (times --base-batch)", tf->adaptive_max));
      if (tf->eval_every_samples < 0)
        throw UsageError(fmt::format("--eval-every-samples: {} is negative; 0 evaluates at epoch ends only",
                                     tf->eval_every_samples));
      if (tf->stop_at_accuracy < 0 || tf->stop_at_accuracy > 1)
        throw UsageError(fmt::format("--stop-at-accuracy: {} is outside [0, 1]; e.g. 0.85 (0: never stop early)",
                                     tf->stop_at_accuracy));
      if (tf->base_batch < 0)
        throw UsageError(fmt::format("--base-batch: {} is negative; give the batch --lr was tuned for", tf->base_batch));
      const int64_t base_batch = tf->base_batch > 0 ? tf->base_batch : 64;
      int64_t micro = 0;
      if (!auto_batch) {
        try {
          size_t used = 0;
          micro = std::stoll(tf->batch, &used);
          if (used != tf->batch.size()) micro = 0;
        } catch (const std::exception&) {
          micro = 0;
        }
        if (micro <= 0 || micro > std::numeric_limits<int32_t>::max())
          throw UsageError(fmt::format("--batch: '{}' is not a micro-batch in 1..{} or auto", tf->batch,
                                       std::numeric_limits<int32_t>::max()));
      }
      // several ranks (saturate launch, torchrun): global batch = micro x accumulation x world size
      TrainRanks ranks = prepare_train_ranks(*distflags, *flags);
      const int world = ranks.world_size();
      if (auto_batch && !ranks.dp_devices.empty())
        throw UsageError("--parallel dp with --batch auto: the search probes one GPU, not the replicas together; give "
                         "--batch N (the whole batch, split over the GPUs)");
      if (!ranks.writer()) tf->quiet = true;  // rank 0 reports
      BatchRequest request;
      request.micro_batch = micro;  // 0: auto
      request.accumulation = tf->accumulate;
      request.global_batch = tf->global_batch;
      request.world_size = world;
      check_batch_request(request);  // errors name --batch, --accumulate, --global-batch
      if (tf->target_memory < 0 || tf->target_memory > 1)
        throw UsageError(fmt::format("--target-memory: {} is outside (0, 1]; e.g. 0.9 leaves 10 % of the budget free",
                                     tf->target_memory));
      if (tf->epochs <= 0 && tf->steps <= 0)
        throw UsageError(fmt::format("--epochs {}: give at least one epoch or --optimizer-steps N", tf->epochs));
      if (!tf->resume.empty() && !tf->checkpoint_dir.empty() && tf->resume != tf->checkpoint_dir)
        throw UsageError(fmt::format("--resume {} and --checkpoint-dir {} differ; a resumed run keeps writing where it "
                                     "resumed from",
                                     tf->resume, tf->checkpoint_dir));
      // token models read language-model data (tokens:FILE, synthetic); image models the loader's
      // (--seq-len or --vocab make a TorchScript file a token model, as resolve_model_spec does)
      const bool token_model = flags->tokens || flags->model == "gpt" || flags->seq_len > 0 || flags->vocab > 0;
      const bool token_data = is_token_data(data->data) || (token_model && data->data == "synthetic");
      const WorkloadFlags wf = token_data ? *flags : with_data_shape(*data, *flags);
      if (!token_data && !data->dataset)
        throw UsageError("--data: training needs a dataset (e.g. fashion-mnist, idx:DIR, cifar10:DIR; tokens:FILE for "
                         "token models)");
      if (token_data && !token_model)
        throw UsageError(fmt::format("--data {}: token data feeds token models (gpt, or a TorchScript file with "
                                     "--tokens); {} takes images",
                                     data->data, flags->model));
      if (!tf->save.empty()) check_output_path(tf->save, {"--save", "model.pt"});  // before the training
      auto session = open_session(wf);
      connect_train_ranks(ranks, *distflags, session->device);  // several ranks: the process group
      Workload& workload = *session->workload;
      const int workers = token_data ? 0 : (data->workers == "auto" ? 2 : std::stoi(data->workers));
      const int64_t seq_len = workload.built().spec.seq_len;
      TokenCorpus corpus;  // tokens:FILE, its held-out end (default 10 %)
      if (is_token_data(data->data))
        corpus = read_token_corpus(data->data.substr(7), token_val_fraction(data->val_fraction_arg), seq_len);
      // held-out data: the data's test split, or the samples --val-fraction holds out (images:, wds:;
      // training never sees them). Never the training samples under the name "test".
      DatasetOptions eval_options;
      eval_options.split = data->val_fraction > 0 ? "val" : "test";
      eval_options.val_fraction = data->val_fraction;
      eval_options.skip_bad_samples = data->skip_bad_samples;
      std::string eval_split;  // "test", "val", or empty: no evaluation
      std::shared_ptr<const Dataset> held_out;
      try {
        if (token_data) {
          if (!corpus.val.defined()) throw UsageError("no held-out text");
          eval_split = "val";
        } else {
          held_out = open_dataset(data->data, eval_options);
          eval_split = eval_options.split;
        }
      } catch (const UsageError&) {
        if (data->val_fraction > 0) throw;  // the val split exists: its errors are errors
        if (!tf->quiet)
          std::cerr << fmt::format("saturate: --data {}: no test or validation split: no evaluation{}\n", data->data,
                                   can_hold_out(data->data) ? " (use --val-fraction F)" : "");
      }
      // the step training will run: precision, checkpointing, clipping, a whole global batch in
      // micro-batches, the loader's prefetched batches, the evaluation
      TrainingFootprint footprint = step_footprint_flags;
      footprint.clip_grad_norm = tf->clip_grad_norm;
      footprint.prefetched_batches = static_cast<int64_t>(workers) * data->prefetch;
      if (!eval_split.empty()) {
        footprint.eval_batch = tf->eval_batch;
        footprint.eval_batch_per_micro = tf->eval_batch > 0 ? 0 : 4;
        footprint.eval_prefetched_batches = static_cast<int64_t>(workers) * data->prefetch;
      }
      if (auto_batch) {
        // the search's trials run that step
        AutoBatchOptions ao;
        ao.footprint = footprint;
        ao.request = request;
        ao.search.target_fraction =
            tf->target_memory > 0 ? tf->target_memory : (session->device.is_cuda() ? 0.95 : 1.0);
        if (!tf->quiet) ao.search.on_trial = [](const Trial& t) { std::cerr << trial_line(t) << std::endl; };
        // several ranks: every rank probes the same batch, an OOM on any is one for all
        ao.run_search = [&ranks](TrialRunner& runner, const SearchOptions& so) {
          return search_across_ranks(runner, so, ranks.group.get(), /*exact_ranks=*/false).result;
        };
        const AutoBatch chosen = choose_micro_batch(workload, *session->meter, ao);
        micro = chosen.micro_batch;
        if (!tf->quiet) std::cerr << fmt::format("saturate: --batch auto: {}\n", chosen.reason);
      }
      // --objective throughput|goodput and --adaptive: the throughput curve up to the micro-batch
      // that trains, timed with the same step; goodput's noise scale on this data at the base batch
      ObjectiveOutcome picked;
      std::unique_ptr<AdaptiveBatch> adaptive;
      double lr_gain = 1;
      if (objective != Objective::kMemory || tf->adaptive) {
        Probe probe(workload, *session->meter);
        TrainingFootprint f = footprint;
        f.global_batch = 0;  // each trial's batch is its own global batch
        probe.set_footprint(f);
        if (objective != Objective::kMemory) {
          if (world > 1)
            throw UsageError(fmt::format("--objective {}: the throughput curve is timed in one process; choose the "
                                         "batch with one process, or use --adaptive across ranks",
                                         objflags->objective));
          ObjectiveOptions oo = objective_opts;
          oo.base_batch = base_batch;
          const auto source = noise_batches(data->dataset, token_data, corpus, workload, wf.seed, session->device);
          picked = pick_by_objective(probe, oo, micro, source.next, source.name,
                                     tf->quiet ? ObjectiveProgress{} : objective_progress_lines(source.name));
          micro = picked.batch;
          request.micro_batch = micro;
          if (objective == Objective::kGoodput) {
            request.accumulation = 1;
            if (goodput_lr) lr_gain = picked.goodput->lr_gain;
          }
          if (!tf->quiet) std::cerr << "saturate: --objective " << objflags->objective << ": " << picked.reason << "\n";
        } else {
          if (base_batch % world != 0)
            throw UsageError(fmt::format("--base-batch: {} is not shared equally by {} ranks; give a multiple of {}",
                                         base_batch, world, world));
          const int64_t unit = base_batch / world;
          ThroughputCurveOptions co;
          co.max_batch = micro;
          if (!tf->quiet)
            std::cerr << fmt::format("saturate: --adaptive: timing samples/s at log-spaced batches up to {}\n", micro);
          ThroughputCurve curve = measure_throughput_curve(probe, co);
          curve = mean_curve_across_ranks(std::move(curve), co, ranks.group.get());
          AdaptiveBatchOptions ad;
          ad.unit = unit;
          ad.world_size = world;
          ad.max_units = tf->adaptive_max;
          ad.max_micro_batch = micro;
          ad.every = tf->adapt_every;
          ad.lr_rule = lr_rule_for(workload);
          ad.curve = std::move(curve);
          adaptive = std::make_unique<AdaptiveBatch>(std::move(ad));
          micro = adaptive->micro_batch();
          request.micro_batch = micro;
          request.global_batch = base_batch;
          if (!tf->quiet)
            std::cerr << fmt::format("saturate: --adaptive: starting at global batch {} (micro-batch {}), growing to at "
                                     "most {} by goodput every {} steps\n",
                                     base_batch, micro, base_batch * tf->adaptive_max, tf->adapt_every);
        }
      }
      const BatchPlan plan = plan_batches(request, micro);
      micro = plan.micro_batch;
      const int64_t accumulation = plan.accumulation;
      const int64_t global = plan.rank_batch;  // this rank's samples per step
      o.micro_batch = micro;
      o.accumulation = accumulation;
      o.epochs = tf->epochs;
      o.max_steps = tf->steps;
      o.clip_grad_norm = tf->clip_grad_norm;
      o.oom_backoff = !tf->no_backoff;
      o.checkpoint_dir = tf->resume.empty() ? tf->checkpoint_dir : tf->resume;
      o.checkpoint_every = tf->checkpoint_every;
      o.resume = !tf->resume.empty();
      o.resume_settings = {{"--seed", std::to_string(wf.seed)}};

      LoaderOptions lo;
      lo.batch_size = global;
      lo.workers = workers;
      lo.prefetch = data->prefetch;
      lo.skip_bad_samples = data->skip_bad_samples;
      lo.augment_enabled = !data->no_augment;
      lo.seed = wf.seed;
      lo.device = session->device;
      // the model's sample shape, as the search's loader gets it (data_flags.cpp): --input 3x32x32
      // on Fashion-MNIST converts its 1x28x28 images the same way in the search and in training
      const auto& sample = workload.built().sample_shape;
      if (sample.size() == 3) lo.shape = {sample[0], sample[1], sample[2]};
      else if (sample.size() == 2) lo.shape = {1, sample[0], sample[1]};
      lo.classes = workload.built().classes;
      setup_train_ranks(ranks, *distflags, workload.model(), lo, o);  // shard, DDP, rank-0 checkpoints
      setup_data_parallel(ranks, workload, o);  // --parallel dp: replicas over the visible GPUs
      std::unique_ptr<TrainData> train_data;
      std::unique_ptr<EvalData> eval;
      const int64_t eval_batch = tf->eval_batch > 0 ? tf->eval_batch : 4 * micro;
      if (token_data) {
        train_data = std::make_unique<TokenTrainData>(corpus, seq_len, workload.built().classes, global * world, wf.seed,
                                                      ranks.rank(), world);
        if (corpus.val.defined()) eval = std::make_unique<TokenEvalData>(corpus.val, seq_len, eval_batch);
      } else {
        train_data = std::make_unique<LoaderTrainData>(data->dataset, lo);
        if (held_out) {  // every rank evaluates the whole held-out split (none waits for rank 0 in a collective)
          LoaderOptions eo = lo;
          eo.shard = ShardOptions{};
          eo.batch_size = eval_batch;
          eval = std::make_unique<LoaderEvalData>(held_out, eo);
        }
      }
      const std::string data_name = train_data->name();
      const double lr = workload.learning_rate();
      o.schedule.peak_lr = scale_learning_rate(lr, global * world, tf->base_batch, scaling) * lr_gain;
      o.schedule.warmup_steps = tf->warmup_steps;
      o.schedule.decay = decay;
      const int64_t per_epoch = train_data->steps_per_epoch();
      o.schedule.total_steps = tf->steps > 0 ? tf->steps : tf->epochs * per_epoch;
      o.schedule.step_every = per_epoch;
      const int64_t total = o.schedule.total_steps;
      // step phases, utilization and the bottleneck verdict (docs/monitor.md); --no-monitor: none
      const std::unique_ptr<TrainMonitor> monitor = make_train_monitor(*mflags, session->device, global);
      o.observer = monitor.get();
      const auto noise = tf->noise_scale || adaptive ? std::make_shared<GradientNoiseScale>() : nullptr;
      o.noise = noise.get();
      o.adaptive = adaptive.get();
      o.eval_every_samples = tf->eval_every_samples;
      o.stop_at_accuracy = tf->stop_at_accuracy;
      if (!tf->quiet) {
        std::cerr << fmt::format("saturate: training {} on {} ({}), micro-batch {} x {} = global batch {}, {} steps "
                                 "({} per epoch), {} {}, lr {:g}\n",
                                 session->context.model_name, data_name, session->context.device_info, micro,
                                 world > 1 ? fmt::format("{} x {} ranks", accumulation, world)
                                           : std::to_string(accumulation),
                                 global * world, total, per_epoch, stepflags->precision, to_string(o.checkpointing),
                                 o.schedule.peak_lr);
        auto eta = std::make_shared<EtaEstimator>();
        o.on_step = [total, every = std::max<int64_t>(1, tf->log_every), mon = monitor.get(), noise, eta](
                        int64_t step, double loss, double lr_now) {
          eta->observe(step + 1, EtaEstimator::Clock::now());
          if ((step + 1) % every == 0 || step + 1 == total) {
            std::string noise_text;
            if (noise) {
              const auto b = noise->noise_scale();
              noise_text = b ? fmt::format("  noise scale {:.0f}", *b) : std::string("  noise scale -");
            }
            std::string pace;  // the recent pace and the time left at it
            if (const auto rate = eta->steps_per_s())
              pace = step + 1 < total ? fmt::format("  {:.3g} steps/s  ETA {}", *rate, format_duration(*eta->seconds_left(total)))
                                      : fmt::format("  {:.3g} steps/s", *rate);
            std::cerr << fmt::format("  step {:>6}/{}  loss {:.4f}  lr {:.3g}{}{}{}\n", step + 1, total, loss, lr_now,
                                     pace, noise_text, mon ? "  " + mon->status_text() : std::string());
          }
        };
        o.on_eval = [eval_split](int64_t epoch, double loss, double acc) {
          std::cerr << fmt::format("  epoch {} {} loss {:.4f} accuracy {:.2f} %\n", epoch, eval_split, loss, 100.0 * acc);
        };
        o.on_adapt = [base_batch, a = adaptive.get()](const AdaptiveChange& c) {
          std::cerr << fmt::format("saturate: --adaptive: from step {}: noise scale {:.0f} -> global batch {} -> {} "
                                   "(goodput x{:.2f}), micro-batch {}, learning rate x{:.2f} of the base\n",
                                   c.step, c.noise_scale, c.old_units * base_batch, c.new_units * base_batch,
                                   c.goodput_gain, a->micro_batch(), a->lr_gain());
        };
        o.on_backoff = [](int64_t step, int64_t old_micro, int64_t new_micro) {
          std::cerr << fmt::format("saturate: out of memory at step {}: micro-batch {} -> {}, accumulation doubled, "
                                   "global batch unchanged; redoing the step\n",
                                   step, old_micro, new_micro);
        };
      }
      // memory after every step must stay flat once warm (seed M2): warn once if it grows.
      LeakWatch leak_watch(*session->meter);
      const auto progress = o.on_step;
      o.on_step = [&leak_watch, progress](int64_t step, double loss, double lr_now) {
        if (progress) progress(step, loss, lr_now);
        const std::string warning = leak_watch.after_step(step);
        if (!warning.empty()) std::cerr << "saturate: warning: " << warning << "\n";
      };
      Trainer trainer(workload, *session->meter, *train_data, eval.get(), o);
      OpProfile op_profile;
      if (!tf->profile_ops.empty()) op_profile.start();
      const TrainResult r = trainer.run();
      if (op_profile.running() && ranks.writer())
        write_json(op_table_json(op_profile.stop(), r.steps), tf->profile_ops, std::cout);
      const int exit_status = r.stopped_by_signal ? 128 + r.stopped_by_signal : 0;
      if (!ranks.writer()) return exit_status;  // rank 0 writes the model and the summary
      // an interrupted run's weights are not the trained model --save names: its checkpoint has them
      if (!tf->save.empty() && !r.stopped_by_signal) save_model(workload.model(), tf->save);
      TrainSummary summary;
      summary.context = session->context;
      summary.data = data_name;
      summary.precision = stepflags->precision;
      summary.checkpointing = stepflags->checkpointing;
      summary.fast_paths = o.fast_paths.to_string();
      summary.loss_every = o.loss_every;
      summary.result = r;
      summary.eval_split = eval_split;
      summary.leak = leak_watch.report();
      summary.leak_sites = leak_watch.sites();
      if (monitor) summary.monitor = monitor->finish();
      if (picked.objective != Objective::kMemory) summary.objective = picked;
      if (adaptive) summary.adaptive = adaptive_summary(*adaptive, base_batch, tf->adaptive_max, lr_rule_for(workload));
      if (r.stopped_by_signal)
        summary.interrupted = TrainInterruption{signal_name(r.stopped_by_signal), exit_status, r.steps, o.checkpoint_dir};
      if (noise)
        summary.noise = TrainNoiseSummary{noise->noise_scale(), noise->gradient_sq_norm(), noise->trace_covariance(),
                                          noise->measurements()};
      summary.compute = train_compute_json(workload, *session->meter, o, r, world);
      nlohmann::json j = summary.to_json();
      add_train_rank_json(j, ranks);
      if (flags->json == "-") {
        write_json(j, "-", std::cout);
      } else {
        std::cout << train_summary_text(j);
        if (!flags->json.empty()) write_json(j, flags->json, std::cout);
      }
      write_html_report(j, tf->html);
      return exit_status;
    };
  });
}

}  // namespace saturate::cli

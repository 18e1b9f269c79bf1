// Implements: `saturate train` as a library call (docs/train.md): options in, checked once here,
// the run's TrainSummary out. Everything between the flags and the summary lives here: the
// micro-batch searched with the step, data and evaluation training will run (`micro_batch` 0),
// the objective's or the adaptive batch's set-up, the learning rate scaled for the global batch,
// the loader (sharded across ranks), the held-out data, the leak watch, the monitor, the noise
// scale, the operator profile, and the trainer. Progress goes to the caller's events; the
// library prints nothing.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/core/count_or_auto.h"
#include "saturate/core/memory_meter.h"
#include "saturate/data/dataset.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/monitor/op_profile.h"
#include "saturate/search/objective.h"
#include "saturate/search/search.h"
#include "saturate/session/train_ranks.h"
#include "saturate/report/progress_lines.h"
#include "saturate/report/train_summary.h"
#include "saturate/train/auto_batch.h"
#include "saturate/train/lr_schedule.h"
#include "saturate/data/text_data.h"
#include "saturate/data/token_data.h"
#include "saturate/train/train_events.h"
#include "saturate/train/trainer.h"

#include "saturate/dist/env.h"

namespace saturate {

struct TrainSessionOptions {
  /// micro_batch 1..2^31-1: samples per forward/backward; auto: the largest that trains,
  /// searched with the step, the data and the evaluation training will run.
  CountOrAuto micro_batch = CountOrAuto::of(64);
  /// A micro-batch per rank as written ("2700,4400": rank r takes the r-th; with `shares`, ranks
  /// of unequal memory), compared across ranks as one setting; micro_batch is this rank's. Empty:
  /// one value for every rank.
  std::string micro_batches;
  /// accumulation >= 1: micro-batches per optimizer step (not given: from global_batch, else 1).
  std::optional<int64_t> accumulation;
  /// global_batch >= 1: samples per optimizer step, all ranks (not given: micro x accumulation x
  /// ranks).
  std::optional<int64_t> global_batch;
  /// target_fraction (0, 1]: with micro_batch auto, the share of the budget the measured peak may
  /// use (not given: 1.0 on CPU, where the budget is exact; 0.95 on CUDA, for fragmentation).
  std::optional<double> target_fraction;
  /// epochs >= 0 and max_steps >= 0 (optimizer steps; overrides epochs), not both 0.
  int64_t epochs = 1;
  int64_t max_steps = 0;
  LrDecay lr_decay = LrDecay::kConstant;
  int64_t warmup_steps = 0;  ///< >= 0 optimizer steps of linear warm-up
  /// lr_scaling from base_batch to the global batch; nullopt (auto): with goodput or adaptive the
  /// noise scale's rule, none otherwise.
  std::optional<LrScaling> lr_scaling;
  /// base_batch >= 1: the global batch the learning rate was tuned for (not given:
  /// kDefaultBaseBatch, 32, for goodput and adaptive, as the search's goodput; no scaling otherwise).
  std::optional<int64_t> base_batch;
  /// objective: memory (the micro-batch as given or searched), throughput or goodput (then
  /// micro_batch must be 0: the objective chooses it, from the curve up to the one that trains).
  ObjectiveOptions objective;
  /// adaptive: re-choose the global batch (in units of base_batch) and the learning rate during
  /// training by goodput (Pollux), every adapt_every >= 1 steps, up to adaptive_max 1..1024 units.
  bool adaptive = false;
  int64_t adapt_every = 50;
  int64_t adaptive_max = 64;
  /// eval_batch 1..2^31-1 as given; auto searches the evaluation's own batch beside training's
  /// state (train/auto_batch.h); not given (nullopt): auto when micro_batch is auto, else 4x the
  /// micro-batch.
  std::optional<CountOrAuto> eval_batch;
  /// eval_every_samples >= 0 (0: at epoch ends only); stop_at_accuracy 0..1 (0: never stop early).
  int64_t eval_every_samples = 0;
  /// max_tokens: text:FILE batches of similar lengths holding up to this many padded tokens
  /// (documents x the longest; data/token_budget.h) instead of a fixed count; auto: the
  /// micro-batch x what it was sized for (the longest document when searched, else seq_len);
  /// not given (nullopt): fixed batches. A given global_batch then caps the documents per batch.
  std::optional<CountOrAuto> max_tokens;
  double stop_at_accuracy = 0;
  /// checkpoint_dir ("": none), checkpoint_every >= 0 steps (0: epoch ends), resume from it.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  bool oom_backoff = true;
  int64_t loss_every = 10;  ///< >= 1 steps between loss read-backs
  bool noise_scale = false;  ///< measure the gradient noise scale every step
  /// The step: precision, checkpointing, clipping and fast paths (the footprint's other fields
  /// are set here).
  TrainingFootprint step;
  /// The monitor (step phases, utilization, bottleneck); nullopt: none.
  std::optional<MonitorOptions> monitor;
  bool profile_ops = false;  ///< an operator profile of the run (TrainSessionResult::op_profile)
  uint64_t seed = 0;         ///< data order and augmentation; checked on resume
  /// A graceful stop (not owned): once it holds a signal number the run ends after the step.
  const std::atomic<int>* stop = nullptr;
  /// UsageError naming the option.
  void check() const;
};

/// What to train on: a dataset of samples (through the loader) or token text.
struct TrainSessionData {
  std::shared_ptr<Dataset> train;             ///< sample data (nullptr: tokens)
  std::shared_ptr<const Dataset> held_out;    ///< its test or validation split (nullptr: none)
  std::string held_out_split = "test";        ///< "test" or "val": the name of held_out
  /// Token data (token models): tokens:FILE's text, or synthetic tokens when corpus.train is
  /// undefined. Evaluates on corpus.val when defined.
  bool tokens = false;
  TokenCorpus corpus;
  /// text:FILE (with tokens true): one document per line, padded batches (data/text_data.h).
  TextCorpus text;
  bool text_documents() const { return text.train.size() > 0; }
  int workers = 2;   ///< loader threads
  /// `workers` auto: the threads are tuned at the micro-batch that trains, before training
  /// (data/data_feed.h tune_workers: added while the step waits on data); `workers` is the fallback.
  bool workers_auto = false;
  int prefetch = 2;  ///< batches each worker keeps ready
  bool skip_bad_samples = false;
  bool augment = true;
  /// As the data options gave them (checked on resume and across ranks; run_settings.h).
  std::string data;
  std::string val_fraction;
  bool drop_last = false;
  /// "test", "val", or "" (no evaluation): the name the held-out results go under.
  std::string eval_split() const;
};

/// A resume from `dir` ("": none): checkpoints go on into it (`checkpoint_dir` empty or the same;
/// a UsageError when it names another folder).
void resume_from(TrainSessionOptions& options, const std::string& dir);

/// The batch plan's request the options make on this rank: the micro-batch (nullopt: searched),
/// the accumulation and the global batch as given (none yet with `shares` auto: it is split once
/// the ranks are timed), the ranks and their shares. check_batch_request on it is a UsageError
/// naming `micro_batch`, `accumulation`, `global_batch` or `shares`, before any device work.
BatchRequest batch_request(const TrainSessionOptions& options, const TrainRanks& ranks);

/// `micro_batch` as written: a count in 1..2^31-1, or auto; a UsageError about `micro_batch`
/// otherwise.
CountOrAuto parse_micro_batch(const std::string& text);
/// `max_tokens` as written: auto, a count of tokens, or 0 (fixed batches: nullopt); a
/// UsageError about `max_tokens` otherwise.
std::optional<CountOrAuto> parse_max_tokens(const std::string& text);
/// `eval_batch` as written: auto, a count, or 0 (the default, nullopt: see TrainSessionOptions);
/// a UsageError about `eval_batch` otherwise.
std::optional<CountOrAuto> parse_eval_batch(const std::string& text);
/// The batch options as written (micro_batch, max_tokens, eval_batch) into `options`. A
/// comma list of micro-batches gives rank r (RANK/WORLD_SIZE as `env` reads them) the r-th: one
/// count per rank, no auto among them (UsageError naming `micro_batch` otherwise).
void parse_batch_options(TrainSessionOptions& options, const std::string& micro_batch, const std::string& max_tokens,
                         const std::string& eval_batch, const DistEnv& env = read_dist_env());

struct HeldOut {
  std::shared_ptr<const Dataset> dataset;  ///< nullptr: none
  std::string split;                       ///< "test" or "val"
  std::string note;                        ///< why there is none, when there is none
};
/// The held-out split of `data` ("fashion-mnist", "images:DIR", ...): its test split, or the
/// samples `val_fraction` holds out (never the training samples under the name "test"). No
/// dataset when the data has none and no val_fraction was given (the note says so); errors of
/// a val split that exists are thrown.
HeldOut open_held_out(const std::string& data, double val_fraction, bool skip_bad_samples);


/// How the progress lines (report/progress_lines.h) describe this run: the model and device from
/// `context`, a step line every `log_every` steps, and the options' objective, step and `adaptive`.
TrainLinesStyle train_lines_style(const TrainSessionOptions& options, const RunContext& context, int64_t log_every);

struct TrainSessionResult {
  TrainSummary summary;
  TrainRanksSummary ranks;
  /// The operator profile with profile_ops (over summary.result.steps).
  std::optional<OpTable> op_profile;
  /// The train JSON (docs/train.md): the summary's with the ranks' keys.
  nlohmann::json to_json() const;
  /// The operator profile's JSON (op_table_json), per step too; null without a profile.
  nlohmann::json op_profile_json() const;
  /// The summary for people (report/train_text.h).
  std::string to_text() const;
};

/// Trains `workload` (its model on its device, the meter's budget applied) on `data`. With
/// several `ranks` a collective: every rank calls it with the same options. Throws UsageError for
/// bad options (before any device work), RuntimeFailure when the run fails.
TrainSessionResult run_train_session(Workload& workload, MemoryMeter& meter, const RunContext& context,
                                     TrainSessionData data, const TrainSessionOptions& options, TrainRanks& ranks,
                                     const TrainEvents& events = {});

}  // namespace saturate

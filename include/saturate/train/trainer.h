// Implements: the training loop of `saturate train`.
// Each optimizer step consumes one global batch, split into micro-batches whose losses are
// weighted by their share of the global batch, so the optimizer sees exactly the mean gradient
// of the global batch whatever the split. Forward passes run under autocast for bf16/fp16, fp16
// with dynamic loss scaling; blocks can be checkpointed. An OOM in a step releases the step's
// memory, halves the micro-batch, doubles the accumulation and redoes the same step: the global
// batch and the samples seen do not change. Checkpoints (model, optimizer, scaler, schedule,
// RNG, data position, loss curve) are written atomically; a resumed run continues bit for bit.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "saturate/core/memory_meter.h"
#include "saturate/data/train_data.h"
#include "saturate/step/phase_observer.h"
#include "saturate/step/workload.h"
#include "saturate/step/activation_checkpoint.h"
#include "saturate/step/step_sync.h"
#include "saturate/step/training_step.h"
#include "saturate/train/adaptive_batch.h"
#include "saturate/train/lr_schedule.h"
#include "saturate/step/fast_paths.h"
#include "saturate/step/precision.h"

namespace saturate {

/// The ranks' shares re-split between two steps (TrainOptions::reshare).
struct Reshare {
  std::vector<int64_t> shares;  ///< every rank's new share of each global batch
  int64_t rank_share = 0;       ///< this rank's
  int64_t max_micro_batch = 0;  ///< this rank's largest micro-batch (0: its share, whole)
};

/// The steps' settings (StepConfig: precision, checkpointing, clipping, fast paths; the
/// process-wide fast paths hold for the run) and the run's.
struct TrainOptions : StepConfig {
  int64_t micro_batch = 32;      ///< samples per forward/backward
  int64_t accumulation = 1;      ///< micro-batches per optimizer step
  /// The planned samples of a step over all ranks, checked on resume; nullopt: micro_batch x
  /// accumulation x ranks (given where the ranks' shares are unequal).
  std::optional<int64_t> global_batch;
  /// Each rank's samples of every global batch where they are unequal (empty: equal): recorded
  /// in checkpoints, so a resume can say how the run it continues was split.
  std::vector<int64_t> shares;
  int64_t epochs = 1;
  int64_t max_steps = 0;         ///< 0: epochs * steps_per_epoch
  LrSchedule schedule;           ///< peak_lr already scaled for the global batch
  std::string checkpoint_dir;    ///< empty: no checkpoints
  int64_t checkpoint_every = 0;  ///< steps; 0: only at epoch ends
  bool resume = false;           ///< continue from checkpoint_dir
  /// Settings besides the trainer's own (optimizer, precision, global batch, data, learning rate,
  /// schedule, clipping) that an exact resume needs unchanged, as {flag, value}, e.g. {"--seed",
  /// "5"}: checkpoints keep them and a resume with another value is refused, naming both.
  std::vector<std::pair<std::string, std::string>> resume_settings;
  bool oom_backoff = true;
  /// Read the loss back every this many steps (each read waits for the device: a sync that
  /// stops the host from queueing work ahead); the steps between keep their losses on the
  /// device and are read together, then on_step runs for each. A non-finite loss is found at
  /// the next read. Reads also happen before evaluations, checkpoints and the last step.
  int64_t loss_every = 1;
  /// Count the FLOPs of the run's first step (monitor/flop_counter.h): TrainResult::flops_per_step.
  bool count_flops = false;
  /// false on ranks other than 0: they read checkpoints (resume) but never write them.
  bool write_checkpoints = true;
  /// Data parallelism (not owned; nullptr: one process). The data gives this rank's share.
  StepSync* sync = nullptr;
  /// Told when each step and its phases (data_wait, h2d, forward, backward, optimizer,
  /// allreduce) begin and end (not owned; nullptr: none). The first step of a run and a step
  /// redone after an OOM are reported as not measured (warm-up).
  PhaseObserver* observer = nullptr;
  /// Measures the gradient noise scale every step (step/gradient_noise.h; not owned; nullptr:
  /// not measured). Its state is checkpointed and resumed with the run.
  GradientNoiseScale* noise = nullptr;
  /// `--adaptive` (not owned; nullptr: a fixed batch; needs `noise`). The data's global batch is
  /// then the unit: a step takes units() consecutive batches of it, the epoch and the learning
  /// rate's schedule advance by units, the rate is multiplied by its gain, and its state is
  /// checkpointed. Under data parallelism every rank decides on the ranks' mean noise averages.
  AdaptiveBatch* adaptive = nullptr;
  /// Evaluate every this many samples (all ranks'), besides each epoch end; 0: epoch ends only.
  int64_t eval_every_samples = 0;
  /// Stop after the evaluation that reaches this accuracy (0: never).
  double stop_at_accuracy = 0;
  /// A graceful stop (not owned; nullptr: none): once it holds a signal number, the run ends
  /// after the step in progress, writes a checkpoint when checkpoint_dir is set and returns with
  /// TrainResult::stopped_by_signal. Ranks of a data-parallel run agree on it at the steps whose
  /// losses they read (every loss_every steps), so all stop after the same step.
  const std::atomic<int>* stop = nullptr;
  /// `shares` auto (issue 28): called on every rank after every step but the last (not with
  /// `adaptive`), given the step's wall time, evaluations left out. It may re-split the ranks'
  /// shares (a collective every so often; the gradient weights are its business) and then returns
  /// them: from the next step on, the data gives this rank its new share, in micro-batches of at
  /// most max_micro_batch (and of no more than an OOM back-off left), and checkpoints record them.
  std::function<std::optional<Reshare>(int64_t step, double step_ms)> reshare;
  /// Called after a re-split with this rank's micro-batch and accumulation from then on.
  std::function<void(int64_t micro_batch, int64_t accumulation)> on_reshare;
  /// Called after every optimizer step (progress, leak checks); may be empty.
  std::function<void(int64_t step, double loss, double lr)> on_step;
  /// Called after each evaluation.
  std::function<void(int64_t epoch, double loss, double accuracy)> on_eval;
  /// Called when --adaptive changed the batch (from the next step on).
  std::function<void(const AdaptiveChange&)> on_adapt;
  /// Called when an OOM halved the micro-batch.
  std::function<void(int64_t step, int64_t old_micro, int64_t new_micro)> on_backoff;
  /// Called when an evaluation ran out of memory and its batches are now evaluated in chunks of
  /// `new_chunk` (the training batch is left as it is).
  std::function<void(int64_t step, int64_t old_chunk, int64_t new_chunk)> on_eval_backoff;
};

struct OomBackoff {
  int64_t step = 0;
  int64_t old_micro_batch = 0;
  int64_t new_micro_batch = 0;
};

struct EvalPoint {
  int64_t step = 0;        ///< optimizer steps done
  int64_t samples = 0;     ///< samples trained on (all ranks)
  double train_seconds = 0;  ///< wall time of this run's training so far, evaluations left out
  double loss = 0;
  double accuracy = 0;
};

struct TrainResult {
  int64_t steps = 0;                 ///< optimizer steps done in total (resumed ones included)
  int64_t samples_seen = 0;
  double epochs = 0;
  std::vector<double> losses;        ///< training loss of every step since step 0
  double final_train_loss = 0;
  std::optional<double> final_test_loss;
  std::optional<double> final_test_accuracy;
  std::vector<EvalPoint> evals;      ///< every evaluation of this process's run, in order
  bool reached_accuracy = false;     ///< stopped at TrainOptions::stop_at_accuracy
  int stopped_by_signal = 0;         ///< TrainOptions::stop's signal when it ended the run early
  double samples_per_s = 0;          ///< over the steps this process ran
  int64_t micro_batch = 0;           ///< at the end (after any back-off)
  int64_t accumulation = 0;
  int64_t global_batch = 0;
  std::vector<OomBackoff> oom_backoffs;
  /// Evaluations that ran out of memory: from then on each evaluation batch runs in chunks of
  /// new_micro_batch samples (step: the optimizer steps done before that evaluation).
  std::vector<OomBackoff> eval_oom_backoffs;
  int64_t checkpoints_written = 0;
  /// Checkpoint writes that failed (a full disk, a folder gone read-only): training went on, the
  /// model and the summary are still written; checkpoint_error is the first failure's message.
  int64_t checkpoints_failed = 0;
  std::string checkpoint_error;
  std::optional<int64_t> resumed_from;
  /// A resume: how the checkpointed run split its global batch: its ranks and, with unequal
  /// shares, each rank's (empty: equal shares). This run's split may differ (issue 28 item 4).
  int64_t resumed_world_size = 0;
  std::vector<int64_t> resumed_shares;
  int64_t skipped_steps = 0;         ///< fp16 steps skipped for inf/NaN gradients
  double flops_per_step = 0;         ///< with TrainOptions::count_flops: the first step's FLOPs
  int64_t flops_counted_batch = 0;   ///< this rank's samples in that step
};

class Trainer {
 public:
  Trainer(Workload& workload, MemoryMeter& meter, TrainData& data, EvalData* eval, TrainOptions options);
  /// Trains; throws RuntimeFailure for a NaN loss (fp32/bf16/tf32) or an OOM at micro-batch 1.
  TrainResult run();
  /// Mean loss and accuracy over the evaluation data, under NoGradGuard. An out-of-memory halves
  /// the chunk each evaluation batch is run in and redoes that batch (recorded in `backoffs` at
  /// `step`); RuntimeFailure when a chunk of one sample does not fit.
  std::pair<double, double> evaluate(int64_t step = 0, std::vector<OomBackoff>* backoffs = nullptr);

 private:
  void save_checkpoint(int64_t steps_done, int64_t units_done, torch::optim::Optimizer& optimizer, GradScaler& scaler,
                       const TrainResult& result);
  /// save_checkpoint; a failed write is counted in `result` (checkpoints_failed), not thrown.
  void try_checkpoint(int64_t steps_done, int64_t units_done, torch::optim::Optimizer& optimizer, GradScaler& scaler,
                      TrainResult& result);
  int64_t load_checkpoint(torch::optim::Optimizer& optimizer, GradScaler& scaler, TrainResult& result,
                          int64_t& units_done);
  int64_t load_checkpoint_payload(const std::string& payload, torch::optim::Optimizer& optimizer, GradScaler& scaler,
                                  TrainResult& result, int64_t& units_done);
  std::string model_signature();
  /// {flag, value} of every setting an exact resume needs unchanged (resume_settings included).
  std::vector<std::pair<std::string, std::string>> exact_resume_settings() const;
  /// Other processes take part in each step (DDP): OOMs and losses are agreed on with them. A
  /// sync within one process (DataParallel) backs off alone, at any point of the step.
  bool has_peers() const { return opt_.sync && opt_.sync->communicates(); }
  /// --adaptive after `step`: the ranks' mean noise averages decide the next batch (a collective
  /// with peers); the micro-batch and accumulation follow a change.
  void adapt_batch(int64_t step, TrainingStep& training_step);
  /// `shares` auto re-split: this rank's data, micro-batch (at most `micro_cap`, what an OOM
  /// back-off left) and accumulation from the next step on.
  void take_shares(const Reshare& c, int64_t micro_cap, TrainingStep& training_step);
  /// TrainOptions::stop's signal, agreed with the peers (a collective with them): 0 for none.
  int agreed_stop_signal();

  // run()'s pieces, over one run's state between steps (Loop, trainer.cpp)
  struct Loop;
  StepOptions step_options() const;
  /// UsageError for a run that cannot start (loss_every, too little data, adaptive without a noise meter).
  void check_run_options() const;
  /// The losses still on the device, read together: RuntimeFailure for a non-finite one (not fp16).
  void read_losses(Loop& loop);
  /// The OOM back-off: half the micro-batch, twice the accumulation (the global batch stays), the
  /// loader's pieces with it; an adaptive batch's largest micro-batch lowered with it.
  void halve_micro_batch(Loop& loop);
  /// The step's batch: `units` consecutive batches of the data joined (--adaptive). An
  /// out-of-memory while joining backs off (every rank together) and joins again.
  Batch next_batch(Loop& loop, int64_t units);
  /// One training step; an out-of-memory backs off (back_off_after_step_oom) and redoes it.
  StepResult step_with_backoff(Loop& loop, const Batch& batch);
  /// After an out-of-memory in the step: rethrows what is not one, RuntimeFailure where the ranks
  /// cannot back off together or micro-batch 1 ran out; else frees the step and halves the micro-batch.
  void back_off_after_step_oom(Loop& loop, const std::exception& e, int64_t batch_rows);
  /// An evaluation after the loop's step, recorded with the training time so far (evaluations left out).
  void evaluate_during(Loop& loop, int64_t unit_samples);
  /// What is due after the loop's step (units_before: the data consumed before it).
  struct Due {
    bool last = false, eval = false, checkpoint = false, read_losses = false;
    int64_t unit_samples = 0;  ///< one batch of the data, all ranks' samples
  };
  Due due_after_step(const Loop& loop, int64_t units_before, int64_t total_units) const;
  /// A graceful stop (SIGTERM before a preemption, Ctrl-C) after the loop's step, agreed with the
  /// peers, with a checkpoint: true when the run stops here.
  bool stop_after_step(Loop& loop, const Due& due, torch::optim::Optimizer& optimizer, GradScaler& scaler);
  /// The result's totals after the last step (the last losses read).
  void finish_result(Loop& loop);

  Workload& workload_;
  MemoryMeter& meter_;
  TrainData& data_;
  EvalData* eval_;
  TrainOptions opt_;
  int64_t micro_;
  int64_t accumulation_;
  int64_t eval_chunk_ = 0;  ///< samples per evaluation forward after an eval OOM (0: whole batches)
};

/// Writes a trained model: TorchScript models with save(), built-in ones as a torch::save archive.
void save_model(Model& model, const std::string& path);

}  // namespace saturate

#include "saturate/report/progress_lines.h"

#include <fmt/format.h>

#include "saturate/report/report.h"
#include "saturate/search/objective.h"
#include "saturate/data/batch_plan.h"
#include "train/eta.h"
#include "saturate/train/share_balance.h"

namespace saturate {

ObjectiveProgress objective_progress_lines(const LineSink& line, const std::string& data) {
  ObjectiveProgress p;
  p.on_curve_start = [line](Objective objective, int64_t max_batch) {
    line(fmt::format("saturate: `objective` {}: timing samples/s at log-spaced batches up to {}", to_string(objective),
                     max_batch));
  };
  p.on_point = [line](const ThroughputPoint& p) {
    if (p.ok)
      line(fmt::format("  curve batch {:>6}  {:>10.1f} samples/s  +-{:.1f} %  ({} rounds{})", p.batch,
                       p.samples_per_s, 100 * p.rel_std_error, p.rounds, p.settled ? "" : ", not settled"));
    else
      line(fmt::format("  curve batch {:>6}  failed: {}", p.batch, p.error));
  };
  p.on_noise_start = [line, data](int64_t batch, int steps) {
    line(fmt::format("saturate: measuring the gradient noise scale on {}: {} steps of batch {} in two halves", data,
                     steps, batch));
  };
  return p;
}

DataEvents data_progress_lines(const LineSink& line) {
  DataEvents e;
  e.on_open = [line](const Dataset& d) {
    line(fmt::format("saturate: data {}: {} samples of {}, {} classes", d.name(), d.size(), to_string(d.shape()),
                     d.classes()));
  };
  e.on_workers_point = [line](const WorkerCurvePoint& p) {
    line(fmt::format("saturate: `workers` auto: {} worker(s): {:.1f} samples/s, data wait {:.1f} % of the step",
                     p.workers, p.samples_per_s, 100 * p.data_wait_fraction));
  };
  e.on_workers_chosen = [line](const WorkerTuning& t) {
    line(fmt::format("saturate: `workers` auto chose {} ({})", t.workers, t.reason));
  };
  return e;
}

WorkloadSearchProgress search_progress_lines(const LineSink& line, const std::string& data, bool talk,
                                             bool fast_paths) {
  WorkloadSearchProgress progress;
  if (talk) {
    progress.on_pass = [line](const std::string& pass) { line("saturate: `checkpointing` auto: " + pass); };
    progress.objective = objective_progress_lines(line, data);
  }
  if (fast_paths)
    progress.on_fast_paths = [line](const FastPathChoice& choice) {
      for (const auto& t : choice.tried)
        line(fmt::format("saturate: fast path {:<16} {:>8.2f} ms -> {:>8.2f} ms  {:+6.1f} %  {}", t.name,
                         t.baseline_ms, t.with_ms, 100 * t.gain, t.kept ? "kept" : "not kept: " + t.note));
    };
  return progress;
}

namespace {

std::string step_line(const TrainProgress& p) {
  std::string noise;
  if (p.noise_measured)
    noise = p.noise_scale ? fmt::format("  noise scale {:.0f}", *p.noise_scale) : std::string("  noise scale -");
  std::string pace;  // the recent pace and the time left at it
  if (p.steps_per_s)
    pace = p.step < p.total_steps
               ? fmt::format("  {:.3g} steps/s  ETA {}", *p.steps_per_s, format_duration(*p.seconds_left))
               : fmt::format("  {:.3g} steps/s", *p.steps_per_s);
  return fmt::format("  step {:>6}/{}  loss {:.4f}  lr {:.3g}{}{}{}", p.step, p.total_steps, p.loss, p.lr, pace,
                     noise, p.monitor_status.empty() ? std::string() : "  " + p.monitor_status);
}

/// The lines of the batch choice: the search's trials, `micro_batch` auto, the objective and
/// `adaptive`'s start.
void add_batch_choice_lines(TrainEvents& e, const LineSink& line, const TrainLinesStyle& o) {
  const std::string objective = to_string(o.objective);
  e.objective = [line](const std::string& data) { return objective_progress_lines(line, data); };
  e.on_trial = [line](const Trial& t) { line(trial_line(t)); };
  e.on_auto_batch = [line](const AutoBatch& a) { line("saturate: `micro_batch` auto: " + a.reason); };
  e.on_auto_eval_batch = [line](const AutoEvalBatch& a) { line("saturate: `eval_batch` auto: " + a.reason); };
  e.on_objective = [line, objective](const ObjectiveOutcome& r) {
    line("saturate: `objective` " + objective + ": " + r.reason);
  };
  e.on_adaptive_curve = [line](int64_t micro) {
    line(fmt::format("saturate: `adaptive`: timing samples/s at log-spaced batches up to {}", micro));
  };
  e.on_adaptive_start = [line, max = o.adaptive_max, every = o.adapt_every](int64_t global, int64_t micro) {
    line(fmt::format("saturate: `adaptive`: starting at global batch {} (micro-batch {}), growing to at most {} by "
                     "goodput every {} steps",
                     global, micro, global * max, every));
  };
}

}  // namespace

TrainEvents train_progress_lines(const LineSink& line, const LineSink& warning, const TrainLinesStyle& style,
                                 const std::string& eval_split, bool quiet) {
  TrainEvents e;
  e.on_warning = warning;
  if (quiet) return e;
  add_batch_choice_lines(e, line, style);
  const DataEvents data = data_progress_lines(line);  // `workers` auto, as the search says it
  e.on_workers_point = data.on_workers_point;
  e.on_workers_chosen = data.on_workers_chosen;
  const int64_t base_batch = style.base_batch;
  e.on_start = [line, style, precision = to_string(style.precision),
                checkpointing = to_string(style.checkpointing)](const TrainStart& s) {
    line(fmt::format("saturate: training {} on {} ({}), {}, {} steps ({} per epoch), {} {}, lr {:g}",
                     style.model_name, s.data, style.device_info,
                     rank_batch_arithmetic(s.micro_batch, s.accumulation, s.rank_batch, s.world_size, s.global_batch),
                     s.total_steps,
                     s.steps_per_epoch, precision, checkpointing, s.peak_lr));
  };
  e.on_step = [line, every = std::max<int64_t>(1, style.log_every)](const TrainProgress& p) {
    if (p.step % every == 0 || p.step == p.total_steps) line(step_line(p));
  };
  e.on_eval = [line, eval_split](int64_t epoch, double loss, double acc) {
    line(fmt::format("  epoch {} {} loss {:.4f} accuracy {:.2f} %", epoch, eval_split, loss, 100.0 * acc));
  };
  e.on_adapt = [line, base_batch](const AdaptiveChange& c, int64_t micro, double lr_gain) {
    line(fmt::format("saturate: `adaptive`: from step {}: noise scale {:.0f} -> global batch {} -> {} (goodput "
                     "x{:.2f}), micro-batch {}, learning rate x{:.2f} of the base",
                     c.step, c.noise_scale, c.old_units * base_batch, c.new_units * base_batch, c.goodput_gain, micro,
                     lr_gain));
  };
  e.on_backoff = [line](int64_t step, int64_t old_micro, int64_t new_micro) {
    line(fmt::format("saturate: out of memory at step {}: micro-batch {} -> {}, accumulation doubled, global batch "
                     "unchanged; redoing the step",
                     step, old_micro, new_micro));
  };
  e.on_reshare = [line](const ShareBalance& b, int64_t micro, int64_t accumulation) {
    line(fmt::format("saturate: shares re-split by the speeds measured while training, {}; this rank now "
                     "micro-batch {} x {}",
                     share_change_text(b), micro, accumulation));
  };
  e.on_eval_backoff = [line](int64_t step, int64_t old_chunk, int64_t new_chunk) {
    line(fmt::format("saturate: out of memory in the evaluation after step {}: evaluation batches now run in chunks "
                     "of {} (were {}); the training batch is unchanged",
                     step, new_chunk, old_chunk));
  };
  return e;
}

}  // namespace saturate

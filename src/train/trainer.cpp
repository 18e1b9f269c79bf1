#include "saturate/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include "saturate/core/errors.h"
#include "core/failed_backward.h"
#include "saturate/core/oom.h"
#include "saturate/core/units.h"
#include "saturate/monitor/flop_counter.h"
#include "train/checkpoint_file.h"
#include "saturate/step/fused_optimizer.h"
#include "saturate/step/grad_scaler.h"
#include "saturate/step/rng_state.h"

namespace saturate {

Trainer::Trainer(Workload& workload, MemoryMeter& meter, TrainData& data, EvalData* eval, TrainOptions options)
    : workload_(workload), meter_(meter), data_(data), eval_(eval), opt_(std::move(options)) {
  if (opt_.micro_batch <= 0)
    throw UsageError("micro_batch", fmt::format("{} is not a positive integer", opt_.micro_batch));
  if (opt_.accumulation <= 0)
    throw UsageError("accumulation", fmt::format("{} is not a positive integer", opt_.accumulation));
  check_step_options(workload_, opt_.precision, opt_.checkpointing);  // fp16 on CPU, checkpointing without blocks
  micro_ = opt_.micro_batch;
  accumulation_ = opt_.accumulation;
}

std::pair<double, double> Trainer::evaluate(int64_t step, std::vector<OomBackoff>* backoffs) {
  if (!eval_) return {0.0, 0.0};
  torch::NoGradGuard no_grad;
  Model& model = workload_.model();
  model.train(false);
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  eval_->restart();
  while (auto b = eval_->next()) {
    const int64_t rows = b->inputs.size(0);
    while (true) {  // the batch in chunks of eval_chunk_; an OOM halves the chunk and redoes the batch
      const int64_t chunk = eval_chunk_ > 0 ? std::min(eval_chunk_, rows) : rows;
      double batch_loss = 0;
      int64_t batch_correct = 0, batch_count = 0;
      try {
        for (int64_t start = 0; start < rows; start += chunk) {
          const int64_t n = std::min(chunk, rows - start);
          const torch::Tensor x = b->inputs.slice(0, start, start + n).to(workload_.device());
          const torch::Tensor y = b->targets.slice(0, start, start + n).to(workload_.device());
          torch::Tensor logits;
          {
            AutocastScope autocast(opt_.precision, workload_.device());
            logits = model.forward(x);
          }
          logits = logits.to(torch::kFloat);
          // padded token targets (-100) are not scored: the mean is over the real ones
          const int64_t scored = y.ne(-100).sum().item<int64_t>();
          if (scored == 0) continue;
          batch_loss += workload_.loss(logits, y).item<double>() * static_cast<double>(scored);
          batch_correct += logits.argmax(-1).eq(y).sum().item<int64_t>();
          batch_count += scored;
        }
      } catch (const std::exception& e) {
        if (!is_out_of_memory(e)) {
          model.train(true);
          throw;
        }
        meter_.release_cache();
        if (chunk == 1) {
          model.train(true);
          throw RuntimeFailure(fmt::format("out of memory in the evaluation after step {} with a chunk of one "
                                           "sample; give `eval_batch` less or the run more memory",
                                           step));
        }
        eval_chunk_ = (chunk + 1) / 2;
        if (backoffs) backoffs->push_back({step, chunk, eval_chunk_});
        if (opt_.on_eval_backoff) opt_.on_eval_backoff(step, chunk, eval_chunk_);
        continue;
      }
      loss_sum += batch_loss;
      correct += batch_correct;
      count += batch_count;
      break;
    }
  }
  model.train(true);
  if (count == 0) return {0.0, 0.0};
  return {loss_sum / static_cast<double>(count), static_cast<double>(correct) / static_cast<double>(count)};
}

std::string Trainer::model_signature() {
  std::string sig = workload_.built().spec.name + "|";
  for (const auto& [name, t] : workload_.model().named_tensors())
    sig += name + ":" + format_shape(t.sizes().vec()) + ";";
  return sig;
}

std::vector<std::pair<std::string, std::string>> Trainer::exact_resume_settings() const {
  const int64_t world = opt_.sync ? opt_.sync->world_size() : 1;
  std::vector<std::pair<std::string, std::string>> s = {
      {"`optimizer`", to_string(workload_.optimizer_kind())},
      {"`precision`", to_string(opt_.precision)},
      // the batch the run was started with (micro x accumulation x ranks); an OOM back-off
      // changes the split, never this
      {"global batch", std::to_string(opt_.global_batch.value_or(opt_.micro_batch * opt_.accumulation * world))},
      {"`data`", data_.name()},
      {"`lr`", fmt::format("{:g}", opt_.schedule.peak_lr)},
      {"`lr_schedule`", to_string(opt_.schedule.decay)},
      {"`warmup_steps`", std::to_string(opt_.schedule.warmup_steps)},
      {"`clip_grad_norm`", fmt::format("{:g}", opt_.clip_grad_norm)},
  };
  // a cosine decays over the run's length: another length is another schedule
  if (opt_.schedule.decay == LrDecay::kCosine)
    s.emplace_back("cosine schedule length", fmt::format("{} steps", opt_.schedule.total_steps));
  s.insert(s.end(), opt_.resume_settings.begin(), opt_.resume_settings.end());
  return s;
}

namespace {

// The checkpoint's format (issue 46): version 1 had no version key and kept each setting under its
// display words ("setting.`optimizer`", "setting.global batch"); version 2 names the format,
// its version, and keys every setting by an identifier ("setting.optimizer", "setting.global_batch").
constexpr const char* kCheckpointFormat = "saturate training checkpoint";
constexpr int64_t kCheckpointVersion = 2;

/// "`optimizer`" -> "optimizer", "global batch" -> "global_batch".
std::string setting_key(const std::string& flag) {
  std::string key;
  for (const char c : flag)
    if (c != '`') key += c == ' ' ? '_' : c;
  return "setting." + key;
}

/// Whether `key` is one a version-2 checkpoint writes (the model's tensors, the CUDA generators
/// and the settings by prefix).
bool known_checkpoint_key(const std::string& key) {
  for (const char* k : {"format", "format_version", "signature_hash", "steps_done", "units_done", "adaptive",
                        "configured_micro_batch", "micro_batch", "accumulation", "world_size", "checkpoints_written",
                        "skipped_steps", "losses", "oom_backoffs", "noise_scale", "optimizer", "scaler.scale", "shares",
                        "scaler.growth", "rng.cpu"})
    if (key == k) return true;
  for (const char* prefix : {"model.", "rng.cuda.", "setting."})
    if (key.rfind(prefix, 0) == 0) return true;
  return false;
}

/// The checkpoint's format version (1: no key, every checkpoint before versions): UsageError for
/// a later one (a newer saturate's, whose keys this one may read wrongly), and from version 2 on
/// for a key this saturate does not know.
int64_t checkpoint_version(torch::serialize::InputArchive& archive, const std::string& dir) {
  torch::Tensor version_tensor;
  const int64_t version = archive.try_read("format_version", version_tensor) ? version_tensor.item<int64_t>() : 1;
  if (version < 1 || version > kCheckpointVersion)
    throw UsageError(fmt::format("`resume` {}: the checkpoint is format version {}, and this saturate reads versions 1 "
                                 "to {}: resume with the saturate that wrote it, or start a new `checkpoint_dir`",
                                 dir, version, kCheckpointVersion));
  if (version >= 2)
    for (const std::string& key : archive.keys())
      if (!known_checkpoint_key(key))
        throw UsageError(fmt::format("`resume` {}: the checkpoint (format version {}) has a key this saturate does not "
                                     "know, '{}': it was written by another version or edited; resume with the "
                                     "saturate that wrote it, or start a new `checkpoint_dir`",
                                     dir, version, key));
  return version;
}

/// What an exact resume needs unchanged ({flag, value}), against the checkpoint: keyed by
/// identifiers from version 2 on, where a missing one is an error; version 1 kept them under
/// their display words, and those from before a setting was kept are not checked.
void check_resume_settings(torch::serialize::InputArchive& archive, int64_t version,
                           const std::vector<std::pair<std::string, std::string>>& settings, const std::string& dir) {
  for (const auto& [flag, value] : settings) {
    c10::IValue saved;
    const std::string key = version >= 2 ? setting_key(flag) : "setting." + flag;
    const bool found = archive.try_read(key, saved) && saved.isString();
    if (!found && version >= 2)
      throw UsageError(fmt::format("`resume` {}: the checkpoint (format version {}) has no '{}' ({}): it was written by "
                                   "another version of saturate or edited; restore it, or start a new `checkpoint_dir`",
                                   dir, version, key, flag));
    if (!found) continue;
    if (saved.toStringRef() != value)
      throw UsageError(fmt::format("`resume` {}: the checkpoint was written with {} {} and this run has {} {}; an exact "
                                   "resume needs the same: give {} {}{} as the checkpointed run did, or start a new "
                                   "`checkpoint_dir`",
                                   dir, flag, saved.toStringRef(), flag, value, flag, saved.toStringRef(),
                                   flag == "global batch" ? " (`micro_batch` x `accumulation` x ranks, or `global_batch`)"
                                   : flag == "cosine schedule length" ? " (`optimizer_steps` or `epochs`)" : ""));
  }
}

/// The model's tensors, the optimizer's and the loss scaler's states and the generators, from the
/// checkpoint.
void load_training_states(torch::serialize::InputArchive& archive, Model& model, torch::optim::Optimizer& optimizer,
                          GradScaler& scaler) {
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : model.named_tensors()) {
      torch::Tensor saved;
      archive.read("model." + name, saved, true);
      tensor.copy_(saved);
    }
  }
  torch::serialize::InputArchive opt_archive;
  archive.read("optimizer", opt_archive);
  optimizer.load(opt_archive);
  torch::Tensor scale, growth;
  archive.read("scaler.scale", scale);
  archive.read("scaler.growth", growth);
  scaler.load_state({scale, growth});
  RngStates rng;
  archive.read("rng.cpu", rng.cpu);  // rng.cpu is undefined here: read() gives it a fresh tensor
  for (size_t i = 0;; ++i) {  // CUDA states: only in checkpoints written by CUDA runs
    torch::Tensor state;
    if (!archive.try_read(fmt::format("rng.cuda.{}", i), state)) break;
    rng.cuda.push_back(state);
  }
  restore_rng_states(rng);
}

}  // namespace

void Trainer::save_checkpoint(int64_t steps_done, int64_t units_done, torch::optim::Optimizer& optimizer,
                              GradScaler& scaler, const TrainResult& result) {
  // a replayed CUDA graph advanced the step counts on the device only
  if (auto* capturable = dynamic_cast<CapturableOptimizer*>(&optimizer); capturable && capturable->capturable())
    capturable->sync_host_state();
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kCheckpointFormat)));
  archive.write("format_version", torch::tensor(kCheckpointVersion));
  archive.write("signature_hash", torch::tensor(static_cast<int64_t>(fnv1a64(model_signature()) >> 1)));
  archive.write("steps_done", torch::tensor(steps_done));
  archive.write("units_done", torch::tensor(units_done));
  if (opt_.adaptive) archive.write("adaptive", torch::tensor(opt_.adaptive->state(), torch::kDouble));
  for (const auto& [flag, value] : exact_resume_settings()) archive.write(setting_key(flag), c10::IValue(value));
  archive.write("configured_micro_batch", torch::tensor(opt_.micro_batch));
  archive.write("micro_batch", torch::tensor(micro_));
  archive.write("accumulation", torch::tensor(accumulation_));
  archive.write("world_size", torch::tensor(static_cast<int64_t>(opt_.sync ? opt_.sync->world_size() : 1)));
  if (!opt_.shares.empty()) archive.write("shares", torch::tensor(opt_.shares, torch::kLong));
  archive.write("checkpoints_written", torch::tensor(result.checkpoints_written + 1));
  archive.write("skipped_steps", torch::tensor(result.skipped_steps));
  archive.write("losses", torch::tensor(result.losses, torch::kDouble));
  std::vector<int64_t> backoffs;
  for (const auto& b : result.oom_backoffs) backoffs.insert(backoffs.end(), {b.step, b.old_micro_batch, b.new_micro_batch});
  archive.write("oom_backoffs", torch::tensor(backoffs, torch::kLong));
  if (opt_.noise) archive.write("noise_scale", torch::tensor(opt_.noise->state(), torch::kDouble));
  for (const auto& [name, t] : workload_.model().named_tensors()) archive.write("model." + name, t.detach().cpu(), true);
  torch::serialize::OutputArchive opt_archive;
  optimizer.save(opt_archive);
  archive.write("optimizer", opt_archive);
  const auto scaler_state = scaler.state();
  archive.write("scaler.scale", scaler_state[0]);
  archive.write("scaler.growth", scaler_state[1]);
  // the CPU generator, and each CUDA device's when training on CUDA (dropout draws from them)
  const RngStates rng = capture_rng_states(workload_.device());
  archive.write("rng.cpu", rng.cpu);
  for (size_t i = 0; i < rng.cuda.size(); ++i) archive.write(fmt::format("rng.cuda.{}", i), rng.cuda[i]);
  std::ostringstream out;
  archive.save_to(out);
  write_checkpoint_file(opt_.checkpoint_dir, out.str());
}

void Trainer::try_checkpoint(int64_t steps_done, int64_t units_done, torch::optim::Optimizer& optimizer,
                             GradScaler& scaler, TrainResult& result) {
  try {
    if (opt_.write_checkpoints) save_checkpoint(steps_done, units_done, optimizer, scaler, result);
    ++result.checkpoints_written;
  } catch (const RuntimeFailure& e) {
    // the previous checkpoint stays whole (the write is atomic); the run goes on, so that the
    // trained model and the summary are not lost with it
    if (result.checkpoint_error.empty()) result.checkpoint_error = fmt::format("at step {}: {}", steps_done, e.what());
    ++result.checkpoints_failed;
  }
}

int64_t Trainer::load_checkpoint(torch::optim::Optimizer& optimizer, GradScaler& scaler, TrainResult& result,
                                 int64_t& units_done) {
  // no checkpoint of this model takes more than its tensors, 3 optimizer states each, and the
  // run's losses (a loss per step, under 1 GiB for 100 million steps)
  int64_t state_bytes = 0;
  for (const auto& [name, t] : workload_.model().named_tensors()) state_bytes += t.numel() * 8;
  const std::string payload = read_checkpoint_file(opt_.checkpoint_dir, 4 * state_bytes + (int64_t{1} << 30));
  try {
    return load_checkpoint_payload(payload, optimizer, scaler, result, units_done);
  } catch (const c10::Error& e) {
    // the checksum held, the content did not: an edited file or another program's
    std::string cause = e.what_without_backtrace();
    cause = cause.substr(0, cause.find('\n'));
    throw UsageError(fmt::format("`resume` {}: {} passes its checksum but its content cannot be read ({}); it was "
                                 "written by another version of saturate or edited: restore it, or start a new "
                                 "`checkpoint_dir`",
                                 opt_.checkpoint_dir, checkpoint_path(opt_.checkpoint_dir), cause));
  }
}

int64_t Trainer::load_checkpoint_payload(const std::string& payload, torch::optim::Optimizer& optimizer,
                                         GradScaler& scaler, TrainResult& result, int64_t& units_done) {
  torch::serialize::InputArchive archive;
  std::istringstream in(payload);
  archive.load_from(in);
  // read() into a defined tensor would set_() it in place: every read gets a fresh tensor.
  const auto read = [&](const char* key) {
    torch::Tensor fresh;
    archive.read(key, fresh);
    return fresh;
  };
  // the format: version 1 (no key: every checkpoint before versions) or 2; a later one is a newer
  // saturate's, whose keys this one may read wrongly
  const int64_t version = checkpoint_version(archive, opt_.checkpoint_dir);
  torch::Tensor t = read("signature_hash");
  if (t.item<int64_t>() != static_cast<int64_t>(fnv1a64(model_signature()) >> 1))
    throw UsageError(fmt::format("`resume` {}: the checkpoint was written for another model or model settings; "
                                 "resume with the same `model` and flags, or use another `checkpoint_dir`",
                                 opt_.checkpoint_dir));
  const auto read_int = [&](const char* key) { return read(key).item<int64_t>(); };
  torch::Tensor saved_world;
  const int64_t world = opt_.sync ? opt_.sync->world_size() : 1;
  const int64_t written_world = archive.try_read("world_size", saved_world) ? saved_world.item<int64_t>() : 1;
  result.resumed_world_size = written_world;
  if (torch::Tensor shares; archive.try_read("shares", shares)) {
    const torch::Tensor s = shares.to(torch::kLong).contiguous();
    if (s.dim() != 1 || s.numel() != written_world || (s.numel() > 0 && s.min().item<int64_t>() < 1))
      throw UsageError(fmt::format("`resume` {}: the checkpoint's shares are {} value(s) for {} rank(s): it was "
                                   "edited or damaged; restore it, or start a new `checkpoint_dir`",
                                   opt_.checkpoint_dir, s.numel(), written_world));
    result.resumed_shares.assign(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
  }
  // another number of ranks resumes the same global batches (batch k of the data is a function of
  // k, whoever trains it; the model and optimizer states are every rank's): the global batch is
  // checked with the other settings. --adaptive's state is the ranks' own: refused
  if (written_world != world && opt_.adaptive)
    throw UsageError(fmt::format("`resume` {}: the checkpoint was written by an `adaptive` run of {} rank(s) and this "
                                 "run has {}; resume with the same world size ({}), or start a new `checkpoint_dir`",
                                 opt_.checkpoint_dir, written_world, world,
                                 written_world == 1 ? std::string("one process, without saturate launch")
                                                    : fmt::format("saturate launch `nproc_per_node` {}", written_world)));
  const int64_t steps_done = read_int("steps_done");
  torch::Tensor units;
  units_done = archive.try_read("units_done", units) ? units.item<int64_t>() : steps_done;
  torch::Tensor adaptive;
  const bool has_adaptive = archive.try_read("adaptive", adaptive);
  if (has_adaptive != (opt_.adaptive != nullptr))
    throw UsageError(fmt::format("`resume` {}: the checkpoint was written by a run {} `adaptive`; resume {} it",
                                 opt_.checkpoint_dir, has_adaptive ? "with" : "without", has_adaptive ? "with" : "without"));
  if (opt_.adaptive)
    opt_.adaptive->load_state(std::vector<double>(adaptive.data_ptr<double>(), adaptive.data_ptr<double>() + adaptive.numel()));
  check_resume_settings(archive, version, exact_resume_settings(), opt_.checkpoint_dir);
  // the checkpoint's split when the same micro-batch was asked for (an OOM back-off stays
  // backed off); another split of the same global batch when another was asked for. With
  // unequal shares (global_batch set) rank 0's split is not this rank's: each keeps its own
  torch::Tensor configured;
  if (!opt_.global_batch && (!archive.try_read("configured_micro_batch", configured) ||
                                 configured.item<int64_t>() == opt_.micro_batch || opt_.adaptive)) {
    micro_ = read_int("micro_batch");
    accumulation_ = read_int("accumulation");
  } else if (opt_.adaptive) {  // unequal shares: this rank's own split of its batch at the restored units
    micro_ = opt_.adaptive->micro_batch();
    accumulation_ = (opt_.adaptive->rank_batch() + micro_ - 1) / micro_;
  }
  result.checkpoints_written = read_int("checkpoints_written");
  result.skipped_steps = read_int("skipped_steps");
  t = read("losses");
  result.losses.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  t = read("oom_backoffs");
  for (int64_t i = 0; i + 2 < t.numel(); i += 3)
    result.oom_backoffs.push_back({t[i].item<int64_t>(), t[i + 1].item<int64_t>(), t[i + 2].item<int64_t>()});
  if (torch::Tensor noise; opt_.noise && archive.try_read("noise_scale", noise))
    opt_.noise->load_state(std::vector<double>(noise.data_ptr<double>(), noise.data_ptr<double>() + noise.numel()));
  load_training_states(archive, workload_.model(), optimizer, scaler);
  return steps_done;
}

void Trainer::adapt_batch(int64_t step, TrainingStep& training_step) {
  AdaptiveBatch& adaptive = *opt_.adaptive;
  // every rank decides on the same numbers: the ranks' mean of the noise scale's averages
  const std::vector<double> state = opt_.noise->state();  // decay, count, |G|^2, tr(Sigma)
  std::vector<double> averages = {state[2], state[3]};
  if (has_peers()) averages = opt_.sync->mean(averages);
  std::optional<double> phi;
  if (state[1] > 0 && averages[0] > 0) phi = std::max(0.0, averages[1] / averages[0]);
  const bool changed = adaptive.after_step(step, phi);
  if (has_peers()) {  // the same numbers give the same choice; say so loudly if they did not
    const double mine = static_cast<double>(adaptive.units());
    if (opt_.sync->mean({mine})[0] != mine)
      throw InternalError(fmt::format("`adaptive`: the ranks chose different batches at step {} (this rank {} units)",
                                      step + 1, adaptive.units()));
  }
  if (!changed) return;
  micro_ = adaptive.micro_batch();
  accumulation_ = (adaptive.rank_batch() + micro_ - 1) / micro_;
  training_step.set_micro_batch(micro_);
  if (opt_.on_adapt) opt_.on_adapt(adaptive.changes().back());
}

void Trainer::take_shares(const Reshare& c, int64_t micro_cap, TrainingStep& training_step) {
  opt_.shares = c.shares;
  data_.set_shares(c.shares);
  const int64_t most = c.max_micro_batch > 0 ? c.max_micro_batch : c.rank_share;
  micro_ = std::max<int64_t>(1, std::min({most, micro_cap, c.rank_share}));
  accumulation_ = (c.rank_share + micro_ - 1) / micro_;
  training_step.set_micro_batch(micro_);
  data_.set_parts(accumulation_);
  if (opt_.on_reshare) opt_.on_reshare(micro_, accumulation_);
}

int Trainer::agreed_stop_signal() {
  int signal = opt_.stop->load();
  if (has_peers()) {  // a signal on any rank stops every rank (the signal number of one that got it)
    const std::vector<double> any = opt_.sync->mean({signal > 0 ? 1.0 : 0.0, static_cast<double>(signal)});
    if (signal == 0 && any[0] > 0) signal = static_cast<int>(std::lround(any[1] / any[0]));
  }
  return signal;
}

/// One run()'s state between its steps.
struct Trainer::Loop {
  Loop(TrainingStep& s, TrainResult& r) : training_step(s), result(r) {}
  TrainingStep& training_step;
  TrainResult& result;
  int64_t step = 0;
  int64_t first_step = 0;
  int64_t per_epoch = 0;       // batches of the data in an epoch, as at the run's start
  int64_t units_done = 0;
  int64_t units_at_start = 0;  // a resumed run's units before this process
  int64_t unit_rows = 0;       // samples of one batch of the data (this rank's)
  int64_t global = 0;          // the last step's samples, all ranks'
  int64_t samples_this_run = 0;
  int64_t micro_cap = std::numeric_limits<int64_t>::max();  // the micro-batch an OOM back-off left
  bool measured = false;      // the step is timed (not the run's first, nor a redo after an OOM)
  double eval_seconds = 0;    // evaluations' wall time, left out of EvalPoint::train_seconds
  std::chrono::steady_clock::time_point started;
  struct PendingLoss {
    int64_t step;
    torch::Tensor loss;
    double lr;
  };
  std::vector<PendingLoss> pending;  // losses still on the device: read together every loss_every steps
};

StepOptions Trainer::step_options() const {
  StepOptions so;
  so.step_config() = opt_.step_config();
  so.micro_batch = micro_;
  so.sync = opt_.sync;
  so.observer = opt_.observer;
  so.noise = opt_.noise;
  return so;
}

void Trainer::check_run_options() const {
  if (opt_.loss_every < 1)
    throw UsageError("loss_every", fmt::format("{} is not a positive number of steps; 1 reads every step's loss",
                                               opt_.loss_every));
  if (data_.steps_per_epoch() <= 0)
    throw UsageError(fmt::format("`data` {}: fewer samples than one global batch", data_.name()));
  if (opt_.adaptive && !opt_.noise)
    throw UsageError("`adaptive` decides on the gradient noise scale: it needs the noise meter (TrainOptions::noise)");
  if (opt_.eval_every_samples < 0)
    throw UsageError("eval_every_samples", fmt::format("{} is negative; 0 evaluates at epoch ends only",
                                               opt_.eval_every_samples));
}

void Trainer::read_losses(Loop& loop) {
  for (const Loop::PendingLoss& p : loop.pending) {
    const double loss = p.loss.item<double>();
    if (!std::isfinite(loss) && opt_.precision != Precision::kFp16)
      throw RuntimeFailure(fmt::format("the training loss became {} at step {}; lower `lr` (now {:g}) or add "
                                       "`clip_grad_norm` 1.0",
                                       loss, p.step, p.lr));
    loop.result.losses.push_back(loss);
    if (opt_.on_step) opt_.on_step(p.step, loss, p.lr);
  }
  loop.pending.clear();
}

void Trainer::halve_micro_batch(Loop& loop) {
  const int64_t old_micro = micro_;
  micro_ = (micro_ + 1) / 2;
  accumulation_ *= 2;
  loop.training_step.set_micro_batch(micro_);
  if (opt_.adaptive) opt_.adaptive->lower_max_micro_batch(micro_);
  loop.micro_cap = micro_;
  data_.set_parts(accumulation_);
  loop.result.oom_backoffs.push_back({loop.step, old_micro, micro_});
  if (opt_.on_backoff) opt_.on_backoff(loop.step, old_micro, micro_);
}

Batch Trainer::next_batch(Loop& loop, int64_t units) {
  while (true) {
    try {
      Batch batch = data_.batch_for_step(loop.units_done);
      loop.unit_rows = batch.inputs.size(0);
      if (units > 1) {  // --adaptive: consecutive batches of the data make the step's batch
        std::vector<torch::Tensor> inputs{batch.inputs}, targets{batch.targets};
        for (int64_t u = 1; u < units; ++u) {
          Batch more = data_.batch_for_step(loop.units_done + u);
          inputs.push_back(std::move(more.inputs));
          targets.push_back(std::move(more.targets));
        }
        batch = {torch::cat(inputs), torch::cat(targets)};
      }
      return batch;
    } catch (const std::exception& e) {
      // out of memory while the batch was joined from the loader's pieces (the whole batch and
      // a piece held at once; both freed by now): the ranks back off together as in the step
      // (this rank announces it at the others' next agreement point), and the pieces halve with
      // the micro-batch
      if (!is_out_of_memory(e) || !opt_.oom_backoff || micro_ == 1) throw;
      if (has_peers()) {
        double unused = 0;
        (void)opt_.sync->agree(true, unused, 0, false);
      }
      meter_.release_cache();
      halve_micro_batch(loop);
    }
  }
}

StepResult Trainer::step_with_backoff(Loop& loop, const Batch& batch) {
  while (true) {
    std::unique_ptr<FlopCounter> flops;
    try {
      if (opt_.count_flops && loop.step == loop.first_step) flops = std::make_unique<FlopCounter>();
      StepResult outcome = loop.training_step.run(batch);
      if (flops) {
        loop.result.flops_per_step = flops->total_flops();
        loop.result.flops_counted_batch = batch.inputs.size(0);  // this rank's samples
      }
      return outcome;
    } catch (const std::exception& e) {
      flops.reset();
      back_off_after_step_oom(loop, e, batch.inputs.size(0));
    }
  }
}

void Trainer::back_off_after_step_oom(Loop& loop, const std::exception& e, int64_t batch_rows) {
  const int64_t step = loop.step;
  const bool peer_oom = dynamic_cast<const PeerOutOfMemory*>(&e) != nullptr;
  if (!peer_oom && !is_out_of_memory(e)) throw;
  if (!peer_oom && !opt_.oom_backoff) {
    const std::string what = e.what();
    throw RuntimeFailure(fmt::format("out of memory at step {} with micro-batch {} (OOM back-off is off): {}", step,
                                     micro_, what.substr(0, what.find('\n'))));
  }
  if (has_peers() && !peer_oom) {
    // the backward that all-reduces had begun: the other ranks are inside the collective
    if (loop.training_step.agreed())
      throw RuntimeFailure(fmt::format("out of memory at step {} in the backward pass that all-reduces the "
                                       "gradients (micro-batch {}); the ranks can only back off together "
                                       "before it: rerun with `micro_batch` {} or more memory",
                                       step, micro_, std::max<int64_t>(1, micro_ / 2)));
    double unused = 0;
    (void)opt_.sync->agree(true, unused, 0, false);  // the other ranks back off with this one
  }
  // the step's graph and activations died with the exception; drop its gradients too.
  release_failed_backward();
  loop.training_step.release_gradients();
  meter_.release_cache();
  if (micro_ == 1)
    throw RuntimeFailure(fmt::format("out of memory at step {} with a micro-batch of 1{}; the step's "
                                     "activations are not all of it: the loader's batches wait beside it (fewer "
                                     "with a lower `prefetch` or fewer `workers`), and the model states stay "
                                     "whatever the batch; raise `memory_budget`, hold fewer loader batches, or "
                                     "use `checkpointing` blocks / `precision` bf16",
                                     step, peer_oom ? " (on another rank)" : ""));
  micro_ = std::min<int64_t>(micro_, batch_rows);  // a token budget's micro may exceed its rows
  halve_micro_batch(loop);
  if (PhaseObserver* const obs = opt_.observer) {  // the failed attempt ends here; the redo is timed as a warm-up step
    obs->step_end(static_cast<int>(step), false);
    loop.measured = false;
    obs->step_begin(static_cast<int>(step), false);
  }
}

void Trainer::evaluate_during(Loop& loop, int64_t unit_samples) {
  using clock = std::chrono::steady_clock;
  const auto eval_started = clock::now();
  auto [test_loss, accuracy] = evaluate(loop.step + 1, &loop.result.eval_oom_backoffs);
  loop.eval_seconds += std::chrono::duration<double>(clock::now() - eval_started).count();
  TrainResult& result = loop.result;
  result.final_test_loss = test_loss;
  result.final_test_accuracy = accuracy;
  const double train_seconds = std::chrono::duration<double>(clock::now() - loop.started).count() - loop.eval_seconds;
  result.evals.push_back({loop.step + 1, loop.units_done * unit_samples, train_seconds, test_loss, accuracy});
  if (opt_.on_eval) opt_.on_eval(loop.units_done / loop.per_epoch, test_loss, accuracy);
  if (opt_.stop_at_accuracy > 0 && accuracy >= opt_.stop_at_accuracy) result.reached_accuracy = true;
}

Trainer::Due Trainer::due_after_step(const Loop& loop, int64_t units_before, int64_t total_units) const {
  Due d;
  const int64_t per_epoch = loop.per_epoch;
  d.last = opt_.max_steps > 0 ? loop.step + 1 >= opt_.max_steps : loop.units_done >= total_units;
  const bool epoch_end = loop.units_done / per_epoch != units_before / per_epoch;
  d.unit_samples = opt_.sync ? opt_.sync->global_samples(loop.unit_rows) : loop.unit_rows;
  d.eval = eval_ && (epoch_end || (opt_.eval_every_samples > 0 &&
                                   loop.units_done * d.unit_samples / opt_.eval_every_samples !=
                                       units_before * d.unit_samples / opt_.eval_every_samples));
  const bool periodic = opt_.checkpoint_every > 0 && (loop.step + 1) % opt_.checkpoint_every == 0;
  d.checkpoint = !opt_.checkpoint_dir.empty() && (periodic || epoch_end || d.last);
  d.read_losses = static_cast<int64_t>(loop.pending.size()) >= opt_.loss_every || d.checkpoint || d.eval || d.last;
  return d;
}

bool Trainer::stop_after_step(Loop& loop, const Due& due, torch::optim::Optimizer& optimizer, GradScaler& scaler) {
  // ranks agree on a stop where they read their losses anyway, so none waits in a collective alone
  if (!opt_.stop || due.last || (has_peers() && !due.read_losses)) return false;
  const int signal = agreed_stop_signal();
  if (signal == 0) return false;
  read_losses(loop);
  if (!opt_.checkpoint_dir.empty() && !due.checkpoint)
    try_checkpoint(loop.step + 1, loop.units_done, optimizer, scaler, loop.result);
  loop.result.stopped_by_signal = signal;
  return true;
}

void Trainer::finish_result(Loop& loop) {
  read_losses(loop);
  TrainResult& result = loop.result;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop.started).count();
  const int64_t world = opt_.sync ? opt_.sync->world_size() : 1;
  result.steps = loop.step;
  int64_t global = loop.global, unit_rows = loop.unit_rows;
  if (global == 0) global = opt_.global_batch.value_or(micro_ * accumulation_ * world);
  if (unit_rows == 0) unit_rows = opt_.adaptive ? global / world / opt_.adaptive->units() : global / world;
  result.global_batch = global;
  // this run's samples as counted (token-budget batches differ in size), a resumed part as planned
  result.samples_seen =
      loop.units_at_start * (opt_.sync ? opt_.sync->global_samples(unit_rows) : unit_rows) + loop.samples_this_run;
  result.epochs = static_cast<double>(loop.units_done) / static_cast<double>(loop.per_epoch);
  result.final_train_loss = result.losses.empty() ? 0 : result.losses.back();
  result.samples_per_s = seconds > 0 ? static_cast<double>(loop.samples_this_run) / seconds : 0;
  result.micro_batch = micro_;
  result.accumulation = accumulation_;
}

TrainResult Trainer::run() {
  using clock = std::chrono::steady_clock;
  TrainResult result;
  apply_precision_settings(opt_.precision);
  workload_.model().train(true);
  check_run_options();
  ProcessSwitches switches(opt_.fast_paths);
  TrainingStep training_step(workload_, step_options());
  torch::optim::Optimizer* const optimizer = &training_step.optimizer();
  GradScaler& scaler = training_step.scaler();
  const int64_t per_epoch = data_.steps_per_epoch();
  AdaptiveBatch* const adaptive = opt_.adaptive;
  // the run ends after max_steps optimizer steps, or once epochs x per_epoch batches of the data
  // (units: one each step, or --adaptive's units()) are consumed
  const int64_t total_units = opt_.max_steps > 0 ? std::numeric_limits<int64_t>::max() : opt_.epochs * per_epoch;
  Loop loop(training_step, result);
  loop.per_epoch = per_epoch;
  if (opt_.resume) {
    loop.step = load_checkpoint(*optimizer, scaler, result, loop.units_done);
    training_step.set_micro_batch(micro_);
    result.resumed_from = loop.step;
  }
  int64_t& step = loop.step;
  const auto finished = [&] { return opt_.max_steps > 0 ? step >= opt_.max_steps : loop.units_done >= total_units; };
  loop.units_at_start = loop.units_done;
  if (opt_.sync) opt_.sync->begin_run();
  loop.started = clock::now();
  PhaseObserver* const obs = opt_.observer;
  loop.first_step = step;
  for (; !finished(); ++step) {
    loop.measured = step > loop.first_step;  // the run's first step warms up (allocator, caches, loader start)
    const auto step_started = clock::now();
    if (obs) {
      obs->step_begin(static_cast<int>(step), loop.measured);
      obs->phase_begin(Phase::kDataWait);
    }
    const int64_t units = adaptive ? adaptive->units() : 1;
    const int64_t units_before = loop.units_done;
    Batch batch = next_batch(loop, units);
    if (obs) obs->phase_end(Phase::kDataWait);
    loop.global = opt_.sync ? opt_.sync->global_samples(batch.inputs.size(0)) : batch.inputs.size(0);  // all ranks'
    // the schedule advances by the data consumed (one unit per step without --adaptive)
    const double lr = opt_.schedule.lr_at(loop.units_done) * (adaptive ? adaptive->lr_gain() : 1.0);
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
    const StepResult outcome = step_with_backoff(loop, batch);
    loop.pending.push_back({step, outcome.loss, lr});
    loop.units_done += units;
    const Due due = due_after_step(loop, units_before, total_units);
    const bool last = due.last, read_now = due.read_losses;
    // the read waits for the step's device work, so the observer's step_end follows it; without
    // a read, an observer on a GPU still needs the step finished to read its timing events
    if (read_now) {
      (void)loop.pending.back().loss.item<double>();
    } else if (obs && workload_.device().is_cuda()) {
      torch::cuda::synchronize(workload_.device().index());
    }
    if (obs) obs->step_end(static_cast<int>(step), loop.measured);
    if (!outcome.stepped) ++result.skipped_steps;  // fp16: non-finite gradients, step skipped
    if (read_now) read_losses(loop);
    loop.samples_this_run += loop.global;
    if (adaptive && !last && adaptive->due(step)) adapt_batch(step, training_step);  // never after the last step
    if (opt_.reshare && !adaptive && !last) {  // `shares` auto: the ranks' shares re-split by speed
      const double step_ms = std::chrono::duration<double, std::milli>(clock::now() - step_started).count();
      if (std::optional<Reshare> c = opt_.reshare(step, step_ms)) take_shares(*c, loop.micro_cap, training_step);
    }
    if (due.eval) evaluate_during(loop, due.unit_samples);
    if (due.checkpoint || (result.reached_accuracy && !opt_.checkpoint_dir.empty()))
      try_checkpoint(step + 1, loop.units_done, *optimizer, scaler, result);
    if (result.reached_accuracy) {
      ++step;
      break;
    }
    if (stop_after_step(loop, due, *optimizer, scaler)) {
      ++step;
      break;
    }
  }
  finish_result(loop);
  return result;
}

void save_model(Model& model, const std::string& path) {
  // atomic over a regular file, in place into a FIFO or a device, a folder refused (core/output_file.h)
  const OutputFileOptions o{"`save`", "model.pt"};
  if (const std::shared_ptr<torch::nn::Module> module = model.module()) {
    // the archive torch::save writes, built in memory: LibTorch's file writer aborts the process
    // when a write fails (a full disk, `ulimit -f`); here that is an error naming the file
    std::ostringstream bytes;
    torch::save(module, bytes);
    write_output_file(path, bytes.str(), o);
    return;
  }
  // TorchScript: model.save writes by path, into a temporary renamed over the target
  write_output_file_by_path(path, [&model](const std::string& file) { model.save(file); }, o);
}

}  // namespace saturate

#include "session/run_settings.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "train/checkpoint_file.h"

namespace saturate {
namespace {

constexpr size_t kMaxSettings = 96;  // the digest's length on every rank (the record is padded)

std::string on_off(bool b) { return b ? "on" : "off"; }

/// An optional count as the settings record it: -1 for auto, 0 when not given. The spelling the
/// JSON's settings and every checkpoint written so far hold (a resume compares them).
std::string recorded(const std::optional<CountOrAuto>& c) {
  return !c ? "0" : c->is_auto() ? "-1" : c->to_string();
}

}  // namespace

std::vector<RunSetting> train_run_settings(const Workload& workload, const TrainSessionOptions& o,
                                           const TrainSessionData& d) {
  const ModelSpec& m = workload.built().spec;
  const bool may = true;  // may change on resume
  std::vector<RunSetting> s = {
      {"model", m.name},
      {"input", format_shape(m.input_shape)},
      {"classes", std::to_string(m.classes)},
      {"layers", std::to_string(m.layers)},
      {"width", std::to_string(m.width)},
      {"heads", std::to_string(m.heads)},
      {"seq_len", std::to_string(m.seq_len)},
      {"vocab", std::to_string(m.vocab)},
      {"optimizer", to_string(workload.optimizer_kind())},
      {"lr", fmt::format("{:g}", workload.learning_rate())},
      {"seed", std::to_string(o.seed)},
      {"data", d.data},
      {"no_augment", on_off(!d.augment)},
      {"val_fraction", d.val_fraction},
      {"drop_last", on_off(d.drop_last)},
      {"skip_bad_samples", on_off(d.skip_bad_samples)},
      {"precision", to_string(o.step.precision)},
      {"clip_grad_norm", fmt::format("{:g}", o.step.clip_grad_norm)},
      {"lr_schedule", to_string(o.lr_decay)},
      {"warmup_steps", std::to_string(o.warmup_steps)},
      {"lr_scaling", o.lr_scaling ? to_string(*o.lr_scaling) : "auto"},
      {"base_batch", std::to_string(o.base_batch.value_or(0))},
      {"objective", to_string(o.objective.objective)},
      {"adaptive", on_off(o.adaptive)},
      {"adapt_every", std::to_string(o.adapt_every)},
      {"adaptive_max", std::to_string(o.adaptive_max)},
      {"noise_scale", on_off(o.noise_scale), may},  // measured, not applied (adaptive applies it)
      {"oom_backoff", on_off(o.oom_backoff), may},  // a back-off changes the split, not the batch
      // the batch: its split may change on resume (the global batch may not: the trainer checks it);
      // a count not given is recorded as 0, as every record and checkpoint so far spells it
      {"micro_batch", !o.micro_batches.empty() ? o.micro_batches : o.micro_batch.to_string(), may},
      {"accumulation", std::to_string(o.accumulation.value_or(0)), may},
      {"global_batch", std::to_string(o.global_batch.value_or(0)), may},
      {"target_fraction", fmt::format("{:g}", o.target_fraction.value_or(0)), may},
      // the run's length (a cosine schedule's length is checked by the trainer), evaluation,
      // checkpoints and logging
      {"epochs", std::to_string(o.epochs), may},
      {"max_steps", std::to_string(o.max_steps), may},
      {"eval_batch", recorded(o.eval_batch), may},
      {"max_tokens", recorded(o.max_tokens)},  // another grouping: other batches, other updates
      {"eval_every_samples", std::to_string(o.eval_every_samples), may},
      {"stop_at_accuracy", fmt::format("{:g}", o.stop_at_accuracy), may},
      {"checkpoint_every", std::to_string(o.checkpoint_every), may},
      {"resume", on_off(o.resume), may},
      {"loss_every", std::to_string(o.loss_every), may},
      // the same math, another speed
      {"checkpointing", to_string(o.step.checkpointing), may},
      {"fast_paths", o.step.fast_paths.to_string(), may},
  };
  return s;
}

void check_ranks_agree(const std::vector<RunSetting>& settings, Collectives& ranks) {
  if (ranks.world_size() <= 1) return;
  if (settings.size() + 1 > kMaxSettings)
    throw InternalError(fmt::format("{} run settings, more than the {} the rank check gathers", settings.size(), kMaxSettings));
  std::vector<int64_t> mine(kMaxSettings, 0);
  mine[0] = static_cast<int64_t>(settings.size());
  for (size_t i = 0; i < settings.size(); ++i)
    mine[i + 1] = static_cast<int64_t>(fnv1a64(settings[i].option + "=" + settings[i].value) >> 1);
  const std::vector<int64_t> all = ranks.all_gather(mine);
  const int me = ranks.rank();
  for (int r = 0; r < ranks.world_size(); ++r) {
    if (r == me) continue;
    const int64_t* theirs = all.data() + static_cast<size_t>(r) * kMaxSettings;
    for (size_t i = 0; i < kMaxSettings; ++i) {
      if (theirs[i] == mine[i]) continue;
      const std::string what = i == 0 || i > settings.size()
                                   ? std::string("another saturate (a different set of settings)")
                                   : fmt::format("another `{}` (this rank has {})", settings[i - 1].option,
                                                 settings[i - 1].value);
      throw UsageError(fmt::format("rank {}/{}: rank {} runs with {}; every rank of a job needs the same settings: "
                                   "give each the same flags",
                                   me, ranks.world_size(), r, what));
    }
  }
}

std::vector<std::pair<std::string, std::string>> resume_checked_settings(const std::vector<RunSetting>& settings) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RunSetting& s : settings) {
    if (s.may_change_on_resume) continue;
    bool trainer_keeps = false;  // under its own names, or the model's signature (its tensors' shapes)
    for (const char* own : {"model", "optimizer", "precision", "data", "lr", "lr_schedule", "warmup_steps", "clip_grad_norm"})
      trainer_keeps = trainer_keeps || s.option == own;
    if (!trainer_keeps) out.emplace_back("`" + s.option + "`", s.value);
  }
  return out;
}

}  // namespace saturate

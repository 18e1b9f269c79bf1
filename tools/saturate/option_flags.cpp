#include "option_flags.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/option_text.h"
#include "saturate/session/data_session.h"
#include "saturate/session/run_paths.h"

namespace saturate::cli {
namespace {

/// The value is a finite number in [lo, hi]; `meaning` ends the message ("0: no cap").
CLI::Validator in_range(double lo, double hi, const std::string& meaning, bool whole = false) {
  return CLI::Validator([=](std::string& text) { return number_text_problem(text, lo, hi, whole, meaning); },
                        limit_text(lo) + ".." + limit_text(hi));
}

constexpr bool kShown = true;  // --help shows the default

// clang-format off
const FlagRow kRows[] = {
    {"model", "--model,-m", kShown, "SATURATE_MODEL"},   {"device", "--device", kShown, "SATURATE_DEVICE"},
    {"memory_budget", "--memory-budget", false, "SATURATE_MEMORY_BUDGET"},
    {"input", "--input"}, {"classes", "--classes"}, {"layers", "--layers"}, {"width", "--width"},
    {"heads", "--heads"}, {"seq_len", "--seq-len"}, {"vocab", "--vocab"}, {"tokens", "--tokens"},
    {"optimizer", "--optimizer", kShown}, {"lr", "--lr"}, {"seed", "--seed", kShown},
    {"threads", "--threads", false, "SATURATE_THREADS"}, {"json", "--json"},
    {"precision", "--precision", kShown}, {"checkpointing", "--checkpointing", kShown},
    {"search.checkpointing", "--checkpointing", kShown}, {"fast_paths", "--fast-paths", kShown},
    {"search.fast_paths", "--fast-paths", kShown},
    {"data", "--data", kShown, "SATURATE_DATA"}, {"workers", "--workers", kShown, "SATURATE_WORKERS"},
    {"prefetch", "--prefetch", kShown}, {"drop_last", "--drop-last"}, {"skip_bad_samples", "--skip-bad-samples"},
    {"no_augment", "--no-augment"}, {"val_fraction", "--val-fraction", kShown},
    {"strategy", "--strategy", kShown}, {"target_fraction", "--target-memory", kShown},
    {"max_batch", "--max-batch", kShown}, {"start_batch", "--start-batch", kShown},
    {"measure_steps", "--timed-steps", kShown}, {"required_batch", "--required-batch"},
    {"search.warmup_steps", "--warmup-steps,--warmup", kShown},
    {"confirm_runs", "--confirm", kShown}, {"rank_max_exact", "!--no-rank-max"},
    {"objective", "--objective", kShown}, {"knee_fraction", "--knee", kShown},
    {"noise_steps", "--noise-steps", kShown}, {"search.base_batch", "--base-batch"},
    {"batch", "--batch,-b"}, {"probe.warmup_steps", "--warmup-steps,--warmup", kShown},
    {"probe.measure_steps", "--timed-steps", kShown}, {"memory.warmup_steps", "--warmup-steps,--warmup", kShown},
    {"leak_check_steps", "--leak-check-steps", kShown}, {"keep_loss", "--keep-loss"},
    {"empty_cache", "--empty-cache"}, {"timeline", "--timeline"}, {"plan_for", "--plan-for"},
    {"plan_batches", "--plan-batches", kShown}, {"plan_allocator", "--plan-allocator"}, {"plan_only", "--plan-only"},
    {"sample_hz", "--sample-hz", kShown, "SATURATE_SAMPLE_HZ"}, {"trace", "--trace"}, {"no_monitor", "--no-monitor"},
    {"watch.sample_hz", "--sample-hz", kShown, "SATURATE_SAMPLE_HZ"}, {"interval", "--interval", kShown},
    {"log", "--log"}, {"pid", "--pid"}, {"gpu", "--gpu", kShown},
    {"micro_batch", "--batch,-b", kShown}, {"train.target_fraction", "--target-memory"},
    {"accumulation", "--accumulate"}, {"global_batch", "--global-batch"}, {"epochs", "--epochs", kShown},
    {"max_steps", "--optimizer-steps,--steps"}, {"adaptive", "--adaptive"}, {"adapt_every", "--adapt-every", kShown},
    {"adaptive_max", "--adaptive-max", kShown}, {"no_oom_backoff", "--no-oom-backoff"},
    {"lr_schedule", "--lr-schedule", kShown}, {"warmup_steps", "--lr-warmup-steps", kShown},
    {"lr_scaling", "--lr-scaling", kShown}, {"base_batch", "--base-batch"}, {"clip_grad_norm", "--clip-grad-norm"},
    {"noise_scale", "--noise-scale"}, {"eval_every_samples", "--eval-every-samples", kShown},
    {"stop_at_accuracy", "--stop-at-accuracy"}, {"eval_batch", "--eval-batch"}, {"max_tokens", "--max-tokens"}, {"checkpoint_dir", "--checkpoint-dir"},
    {"checkpoint_every", "--checkpoint-every"}, {"resume", "--resume"}, {"save", "--save"},
    {"loss_every", "--loss-every", kShown}, {"log_every", "--log-every", kShown}, {"profile_ops", "--profile-ops"},
    {"backend", "--backend", kShown, "SATURATE_BACKEND"}, {"dist_timeout", "--dist-timeout", kShown, "SATURATE_DIST_TIMEOUT"},
    {"bucket_mb", "--bucket-mb"}, {"parallel", "--parallel", kShown}, {"shares", "--shares"},
    {"reshare_every", "--reshare-every"}, {"reshare_min_gain", "--reshare-min-gain"}, {"html", "--html"},
    {"nproc_per_node", "--nproc-per-node", kShown, "SATURATE_NPROC_PER_NODE"}, {"nnodes", "--nnodes", kShown},
    {"node_rank", "--node-rank", kShown}, {"master_addr", "--master-addr", kShown, "MASTER_ADDR"},
    {"master_port", "--master-port", kShown}, {"kill_grace", "--kill-grace", kShown},
    // the command line's own options
    {"quiet", "--quiet,-q", false, nullptr, "no progress lines on stderr"},
    {"watch.quiet", "--quiet,-q", false, nullptr, "no live lines, only the summary"},
    {"report.quiet", "-q,--quiet", false, nullptr, "no line on stderr saying what was written"},
    {"format", "--format", kShown, nullptr,
     "stdout: console (table) | json | jsonl (a line per trial as it finishes) | csv | markdown"},
    {"output", "-o,--output", false, nullptr, "the HTML file to write ('-': stdout; default: RUN.html next to RUN.json)"},
    {"run", "RUN.json"},
    // options the library's messages name that no flag of their own sets
    {"world_size", "the world size (WORLD_SIZE)"}, {"prefetched_batches", "--workers x --prefetch"},
    {"eval_every_samples", "--eval-every-samples"}, {"compare_checkpointing", "--checkpointing auto"},
    {"optimizer_steps", "--optimizer-steps"}, {"adaptive_max", "--adaptive-max"},
};
// clang-format on

/// A row's first long flag ("-o,--output" -> "--output"; "!--no-rank-max" -> "--no-rank-max");
/// the row's words when they name no flag.
std::string first_flag(const FlagRow& row) {
  const std::string names = row.names;
  size_t start = 0;
  while (start <= names.size()) {
    const size_t end = std::min(names.find(',', start), names.size());
    std::string name = names.substr(start, end - start);
    if (!name.empty() && name[0] == '!') name = name.substr(1);
    if (name.rfind("--", 0) == 0) return name;
    start = end + 1;
  }
  return names;
}

}  // namespace

const CLI::Validator kNotEmpty(
    [](std::string& text) {
      return text.empty() ? std::string("an empty value (an unset shell variable?); give one, or leave the flag out") : "";
    },
    "");

std::vector<OptionValue> option_values(const CLI::App& cmd) {
  std::vector<OptionValue> values;
  for (const CLI::Option* o : cmd.get_options())
    for (const FlagRow& row : kRows)
      if (first_flag(row) == o->get_name() && (o->count() > 0 || !o->get_default_str().empty()))
        values.push_back({row.key, o->count() > 0 ? o->as<std::string>() : o->get_default_str(), o->count() > 0});
  return values;
}

const FlagRow& flag_row(std::string_view key) {
  for (const FlagRow& row : kRows)
    if (key == row.key) return row;
  throw InternalError(fmt::format("no flag for option '{}' (tools/saturate/option_flags.cpp)", key));
}

CLI::Option* describe(CLI::Option* option, const FlagRow& row, bool whole) {
  const OptionDoc* doc = row.help ? nullptr : &option_doc(row.key);
  option->description(with_flags(row.help ? row.help : std::string(doc->help)));
  if (doc && doc->has_range()) option->check(in_range(doc->min, doc->max, with_flags(std::string(doc->meaning)), whole));
  if (row.show_default) option->capture_default_str();
  if (row.env) option->envname(row.env);
  return option->group(std::string(option_group(row.key)));  // --help lists the flags by heading
}

CLI::Validator thread_count(const std::string& meaning) {
  const int most = max_loader_threads();
  return in_range(0, most, fmt::format("{}; at most 4 per core on this machine's {}", meaning, most / 4), true);
}

std::optional<std::string> find_flag_for_option(const std::string& option) {
  for (const FlagRow& row : kRows)
    if (option == row.key) return first_flag(row);
  return std::nullopt;
}

std::string flag_for_option(const std::string& option) { return find_flag_for_option(option).value_or(option); }

std::string with_flags(const std::string& message) { return name_options(message, find_flag_for_option); }

}  // namespace saturate::cli

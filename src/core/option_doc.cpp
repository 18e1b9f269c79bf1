#include "saturate/core/option_doc.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

constexpr double kBatchMax = 2147483647.0;  // a batch is an int32 of samples

// clang-format off
const std::vector<OptionDoc> kDocs = {
    // the workload (session/workload_session.h)
    {"model", "mlp | convnet | resnet18 | resnet50 | gpt | FILE.pt (TorchScript)"},
    {"device", "auto | cpu | cuda | cuda:N (auto: cuda:0 when present, else cpu)"},
    {"memory_budget", "memory the run may use: 512MiB, 2GiB, 1.5GB, bytes, or a fraction of the device (0.9); "
                      "default 4GiB on CPU, the whole GPU on CUDA; several ranks: A,B,... gives rank r the r-th"},
    {"input", "one sample's shape, e.g. 3x224x224 (default 1x28x28; 3x224x224 for resnets)"},
    {"classes", "output classes (default 10; 1000 for resnets)", 2, 1e7, "output classes"},
    {"layers", "gpt: transformer blocks (4); mlp: hidden layers (3)", 1, 10000, "layers"},
    {"width", "gpt: embedding width (256); mlp: hidden width (1024)", 1, 1e7, "units"},
    {"heads", "gpt: attention heads (4)", 1, 4096, "attention heads"},
    {"seq_len", "gpt / `tokens`: tokens per sample (128); on a .pt it implies `tokens`", 1, 1e7, "tokens"},
    {"vocab", "gpt / `tokens`: vocabulary size (8192); on a .pt it implies `tokens`", 2, 1e9, "tokens"},
    {"tokens", "the TorchScript model takes token ids [batch, seq-len] (`seq_len`, `vocab`)"},
    {"optimizer", "sgd | adam | adamw (Adam keeps two state tensors per parameter)"},
    {"lr", "learning rate (default 0.01 for sgd, 1e-3 for adam/adamw)", 0, 1e6,
           "a learning rate; 0: the optimizer's default"},
    {"seed", "seed for weights and synthetic data", 0, 18446744073709551615.0, "a whole number below 2^64"},
    {"threads", "CPU threads for LibTorch (default: auto: LibTorch's count on a quiet machine, the CPUs other "
                "processes leave free on a busy one; OMP_NUM_THREADS when set)"},
    // the step (step/step_footprint.h, step/fast_paths.h)
    {"precision", "fp32 | tf32 | bf16 | fp16: the step's precision (bf16/fp16 autocast; fp16 with loss scaling, CUDA "
                  "only); trials measure the step training will run"},
    {"checkpointing", "activation checkpointing in the forward pass: none | blocks | every-N"},
    {"search.checkpointing", "activation checkpointing in the trials: none | blocks | every-N | auto (search without "
                             "and with blocks, report both curves, use checkpointing only when it wins)"},
    {"fast_paths", "framework switches (seed B7): none | a list of cudnn_benchmark, tf32, channels_last, "
                   "fused_optimizer, cuda_graphs, threads=N (as `saturate search` chose them: it times them, so "
                   "the default here is none, not the search's auto); train on several ranks also compress_bf16 "
                   "(gradients all-reduced in bf16), and auto | try (compress_bf16 kept when its all-reduce is "
                   "measured at least 1.2x faster)"},
    {"search.fast_paths", "framework switches (seed B7): auto (try them at the found batch on CUDA, keep those "
                          "measured faster) | try (also on CPU) | none | a list to use as given: "
                          "cudnn_benchmark,tf32,channels_last,fused_optimizer,cuda_graphs,threads=N"},
    // data (data/dataset.h, data/loader.h)
    {"data", "real inputs through the loader: fashion-mnist | idx:DIR | cifar10:DIR | cifar100:DIR | images:DIR | "
             "wds:DIR|GLOB | synthetic; token models: tokens:FILE (a byte stream) | text:FILE (one document per line, "
             "padded batches; a search sizes for its longest documents)"},
    {"workers", "`data`: loader threads, N or auto (add workers while the step waits on data: a few timed trials, "
                "which is why train's default is 2 and the search's auto)"},
    {"prefetch", "`data`: batches each worker loads ahead", 1, 1024, "batches per worker"},
    {"drop_last", "`data`: drop each epoch's last partial batch"},
    {"skip_bad_samples", "`data`: skip and count corrupt samples instead of stopping at the first"},
    {"no_augment", "`data`: no random crop and flip (normalization stays)"},
    {"val_fraction", "`data` images:DIR|wds:...: hold out this share of the samples (in [0, 1), by a hash of each "
                     "sample's key) as a val split that training evaluates on and never trains on"},
    // the search (search/search.h, session/workload_search.h)
    {"strategy", "fit (few trials, exact) | binsearch | power (Lightning's) | divisors (of max_batch)"},
    {"target_fraction", "fraction of the budget the recommended batch's measured peak may use (seed B2: 0.8-0.9)",
                        0.01, 1, "a fraction of the budget, e.g. 0.9"},
    {"max_batch", "never try a batch above this (0: no cap)", 0, kBatchMax, "0: no cap"},
    {"start_batch", "first batch of power/binsearch/divisors", 1, kBatchMax, "a batch"},
    {"measure_steps", "timed training steps per trial, after its untimed warm-up steps", 1, 1e6,
     "steps per trial"},
    {"search.warmup_steps", "untimed training steps before a trial's timed ones (the throughput curve's)", 0, 1e6,
     "steps"},
    {"required_batch", "with `checkpointing` auto: the micro-batch you need; checkpointing is chosen when only it "
                       "fits it", 1, kBatchMax, "a micro-batch"},
    {"confirm_runs", "re-probe the found boundary (max and max+1) this many more times; where memory varies from run "
                     "to run, max_batch becomes the largest batch that fit every time and the spread is reported",
                     0, 10, "re-probes"},
    {"rank_max_exact", "with unequal ranks, skip the local search that finds each larger rank's own max exactly"},
    // the objective (search/objective.h)
    {"objective", "memory: the largest batch under the target | throughput: the knee of the measured samples/s "
                  "curve | goodput: samples/s x statistical efficiency from the gradient noise scale (Pollux)"},
    {"knee_fraction", "with `objective` throughput: the smallest batch within this fraction of the best samples/s",
                      0.01, 1, "a fraction of the best samples/s"},
    {"noise_steps", "with `objective` goodput: steps that measure the gradient noise scale (learning rate 0, weights "
                    "put back)", 1, 10000, "steps"},
    {"search.base_batch", "with `objective` goodput: the batch the learning rate was tuned for (default 32)", 1,
                          kBatchMax, "a batch"},
    // probe and memory (probe/probe.h, session/memory_session.h, memory/plan.h)
    {"batch", "batch size (samples per step)", 1, kBatchMax, "samples per step"},
    {"probe.warmup_steps", "untimed training steps first", 0, 1e6, "steps"},
    {"probe.measure_steps", "timed training steps (the median is reported)", 1, 1e6, "steps"},
    {"memory.warmup_steps", "steps before the recorded one (the first makes the optimizer state)", 0, 1e6, "steps"},
    {"leak_check_steps", "also run this many training steps and check that memory stays flat (0: no leak check)", 0,
                         1e9, "0: no leak check"},
    {"keep_loss", "in the leak check, keep every step's loss and its graph alive (a deliberate leak, to see the "
                  "detector work)"},
    {"empty_cache", "empty the device's allocator cache before each trial and report its cost (default: only after "
                    "an out-of-memory)"},
    {"timeline", "write the memory timeline of the last step to FILE: FILE.svg a plot, FILE.pickle PyTorch's memory "
                 "snapshot (pytorch.org/memory_viz), anything else JSON"},
    {"plan_for", "predict the batch for another GPU from a run here: a size (24GiB) or rtx4090, a100-40gb, "
                 "a100-80gb, h100-80gb, h200"},
    {"plan_batches", "the two small batches recorded for `plan_for`"},
    {"plan_allocator", "allocator of the planned device: cuda-caching (default) | exact (a CPU budget)"},
    {"plan_only", "with `plan_for`: only predict, skip the search here"},
    // the monitor (monitor/monitor_observer.h, monitor/process_monitor.h)
    {"sample_hz", "device samples per second during trials and training (0: only at each trial's or window's edges)",
                  0, 10000, "samples per second; 0: only at edges"},
    {"trace", "write a Chrome trace (Perfetto) of trials or training windows, steps, phases and samples to "
              "FILE.json"},
    {"no_monitor", "no phase timing, sampling or bottleneck verdict (to measure their overhead)"},
    {"watch.sample_hz", "samples per second", 0.001, 10000, "samples per second"},
    {"interval", "seconds between live lines on stderr (0: none)", 0, 86400, "seconds; 0: no live lines"},
    {"log", "write every sample to FILE.csv"},
    {"pid", "attach to this running process (and its children) instead of running a command", 1, 4194304,
            "a process id"},
    {"gpu", "the GPU index NVML reads", 0, 1023, "a GPU index"},
    // training (session/train_session.h)
    {"micro_batch", "micro-batch (samples per forward/backward), or auto: the largest that trains, searched with the "
                    "step, data and evaluation training will run; with `shares`, one per rank (e.g. 2700,4400: rank "
                    "r takes the r-th)"},
    {"train.target_fraction", "with `micro_batch` auto: the fraction of the budget the micro-batch's measured peak "
                              "may use (default 1.0 on CPU, where the budget is exact; 0.95 on CUDA, for "
                              "fragmentation)", 0.01, 1, "a fraction of the budget, e.g. 0.9"},
    {"accumulation", "micro-batches per optimizer step (default 1)", 1, 1e6, "micro-batches per optimizer step"},
    {"global_batch", "samples per optimizer step; `accumulation` follows from it", 1, kBatchMax,
                     "samples per optimizer step"},
    {"epochs", "passes over the data", 0, 1e6, "0: give `max_steps`"},
    {"max_steps", "optimizer steps to train (overrides `epochs`; 0: use `epochs`)", 0, 1e12, "0: use `epochs`"},
    {"adaptive", "re-choose the global batch (in units of `base_batch`) and the learning rate during training by "
                 "goodput, from the gradient noise scale measured every step and the throughput curve timed at the "
                 "start (Pollux); `micro_batch` is the largest micro-batch (or auto)"},
    {"adapt_every", "with `adaptive`: re-decide every N optimizer steps", 1, 1e9, "optimizer steps"},
    {"adaptive_max", "with `adaptive`: the global batch grows to at most N x `base_batch`", 1, 1024,
                  "times `base_batch`"},
    {"no_oom_backoff", "fail on OOM instead of halving the micro-batch"},
    {"lr_schedule", "constant | cosine | step (x0.1 every epoch)"},
    {"warmup_steps", "optimizer steps of linear learning-rate warm-up", 0, 1e12, "optimizer steps"},
    {"lr_scaling", "linear | sqrt | none: rescale `lr` from `base_batch` to the global batch (seed B9); auto: with "
                   "`objective` goodput and `adaptive` the noise scale's rule (AdaScale's gain for sgd, its square "
                   "root for adam/adamw), none otherwise"},
    {"base_batch", "the global batch `lr` was tuned for (with `lr_scaling`, `objective` goodput and `adaptive`; "
                   "default 32 for the last two, as the search's goodput)", 1, kBatchMax, "a global batch"},
    {"clip_grad_norm", "clip the global gradient norm (0: off)", 0, 1e12, "a gradient norm; 0: no clipping"},
    {"noise_scale", "measure the gradient noise scale every step (the first micro-batch's gradient against the "
                    "step's; a step of one micro-batch runs as two halves), smoothed over about 20 steps, in the "
                    "progress lines and the summary"},
    {"eval_every_samples", "evaluate every N training samples too (0: at epoch ends only); the summary lists each evaluation "
                   "with its training time", 0, 1e15, "samples; 0: at epoch ends only"},
    {"stop_at_accuracy", "stop after the evaluation that reaches this accuracy (0: never), e.g. 0.85", 0, 1,
                         "an accuracy; 0: never stop early"},
    {"eval_batch", "evaluation batch: N, or auto (searched on its own beside training's state; the default with "
                   "`micro_batch` auto, else 4x the micro-batch)"},
    {"max_tokens", "text:FILE: batches of similar lengths holding up to N padded tokens (documents x the longest) "
                   "instead of a fixed count; auto: the micro-batch x the length it was sized at (the longest document when `micro_batch` is auto, else seq_len); 0: fixed batches"},
    {"checkpoint_dir", "write checkpoints here (atomically)"},
    {"checkpoint_every", "also every N steps (default: each epoch end)", 0, 1e12, "optimizer steps; 0: at epoch ends"},
    {"resume", "continue from the checkpoint in DIR (and keep writing there)"},
    {"save", "write the trained model to FILE"},
    {"loss_every", "read the loss back from the device every N steps (each read is a sync that stops the host from "
                   "queueing work ahead; 1: every step)", 1, 1e12, "optimizer steps; 1: every step"},
    {"log_every", "progress line every N steps on stderr", 1, 1e12, "optimizer steps"},
    {"profile_ops", "write an operator profile of the run (LibTorch's profiler: calls, self and total ms per op, per "
                    "step) to FILE as JSON; it slows each op a little"},
    // several ranks (session/train_ranks.h, dist/launch.h)
    {"backend", "process group when started as several ranks (saturate launch, torchrun, mpirun, srun): auto (nccl "
                "on CUDA, gloo on CPU) | nccl | gloo"},
    {"dist_timeout", "seconds a rendezvous or collective waits for the other ranks before failing", 0.1, 604800,
                     "seconds"},
    {"shares", "each rank's samples of every global batch, one per rank (e.g. 48,16: rank 0 trains on 48, rank 1 "
               "on 16 of every 64; gradients are averaged weighted by them, so the step is the one-process step "
               "of the whole batch): for ranks of unequal speed or memory; auto (with `global_batch`): in "
               "proportion to each rank's samples/s, timed before training and re-split while training "
               "(`reshare_every`). Default: equal shares"},
    {"reshare_every", "with unequal shares: every N steps the ranks' busy times (each step less its waits for "
                      "the others) are gathered and the global batch split anew by them when that is predicted "
                      "1.05x faster or more. Default: 10 with `shares` auto; with given shares (e.g. 48,48) none, "
                      "and N re-splits starting from them; 0: keep the split (with `adaptive` it is kept)",
     0, 1e12, "optimizer steps; 0: never"},
    {"reshare_min_gain", "when the shares are re-split (`reshare_every`): re-split only when the slowest rank's busy time a step is predicted to "
                         "shrink at least this many times (default 1.05; 1: whenever the split by speed differs)",
     1, 100, "a factor, e.g. 1.05"},
    {"bucket_mb", "DDP gradient bucket size in MiB (several ranks). Default: PyTorch's 25, after a 1 MiB first "
                  "bucket; with `fast_paths` auto or try, bucket sizes are timed at the start and the fastest kept",
     0.001, 1048576, "MiB"},
    {"parallel", "ddp: several ranks (saturate launch, torchrun) train with DistributedDataParallel | dp: "
                 "DataParallel in one process over the visible GPUs"},
    {"nproc_per_node", "ranks on this node (one per GPU)"},
    {"nnodes", "nodes in the job (run one launch per node)", 1, 1e6, "nodes"},
    {"node_rank", "this node's index, 0..nnodes-1", 0, 1e6, "this node's index"},
    {"master_addr", "rank 0's host: the rendezvous (TCPStore) binds there"},
    {"master_port", "rendezvous port (0: a free one; needed with `nnodes` > 1)", 0, 65535,
                    "a TCP port; 0: a free one"},
    {"kill_grace", "seconds between SIGTERM and SIGKILL when ranks are stopped", 0, 3600, "seconds"},
    // results (report/)
    {"json", "also write the result as JSON to FILE ('-': stdout, replacing the table)"},
    {"html", "also write the run as one self-contained HTML page with charts to FILE (docs/report.md; the same as "
             "saturate report RUN.json)"},
};
// clang-format on

}  // namespace

const std::vector<OptionDoc>& option_docs() { return kDocs; }

const OptionDoc* find_option_doc(std::string_view key) {
  for (const OptionDoc& d : kDocs)
    if (d.key == key) return &d;
  return nullptr;
}

const OptionDoc& option_doc(std::string_view key) {
  const OptionDoc* d = find_option_doc(key);
  if (!d) throw InternalError(fmt::format("no option is documented as '{}' (core/option_doc.cpp)", key));
  return *d;
}

std::string_view option_group(std::string_view key) {
  // clang-format off
  static const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kGroups = {
      {"Model", {"model", "input", "classes", "layers", "width", "heads", "seq_len", "vocab", "tokens", "optimizer",
                 "lr", "seed"}},
      {"Device, memory and precision", {"device", "memory_budget", "threads", "precision", "checkpointing",
                 "search.checkpointing", "fast_paths", "search.fast_paths", "empty_cache"}},
      {"Data", {"data", "workers", "prefetch", "drop_last", "skip_bad_samples", "no_augment", "val_fraction",
                "max_tokens"}},
      {"Search", {"strategy", "target_fraction", "max_batch", "start_batch", "measure_steps", "search.warmup_steps",
                  "required_batch", "confirm_runs", "rank_max_exact", "objective", "knee_fraction", "noise_steps",
                  "search.base_batch", "plan_for", "plan_batches", "plan_allocator", "plan_only"}},
      {"Step", {"batch", "probe.warmup_steps", "probe.measure_steps", "memory.warmup_steps", "leak_check_steps",
                "keep_loss", "timeline"}},
      {"Training", {"micro_batch", "train.target_fraction", "accumulation", "global_batch", "epochs", "max_steps",
                    "adaptive", "adapt_every", "adaptive_max", "no_oom_backoff", "lr_schedule", "warmup_steps",
                    "lr_scaling", "base_batch", "clip_grad_norm", "noise_scale", "eval_every_samples", "stop_at_accuracy",
                    "eval_batch", "checkpoint_dir", "checkpoint_every", "resume", "save", "loss_every", "log_every",
                    "profile_ops"}},
      {"Monitor", {"sample_hz", "trace", "no_monitor", "watch.sample_hz", "interval", "log", "pid", "gpu"}},
      {"Ranks", {"backend", "dist_timeout", "shares", "reshare_every", "reshare_min_gain", "bucket_mb", "parallel", "nproc_per_node", "nnodes", "node_rank",
                 "master_addr", "master_port", "kill_grace"}},
      {"Output", {"json", "html"}},
  };
  // clang-format on
  for (const auto& [group, keys] : kGroups)
    for (std::string_view k : keys)
      if (k == key) return group;
  return "Output";
}

std::string_view option_name(std::string_view key) {
  const size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

std::string limit_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e10) return fmt::format("{:.0f}", v);
  if (v == std::floor(v)) return fmt::format("{:.0e}", v);
  return fmt::format("{:g}", v);
}

std::string range_text(const OptionDoc& doc) { return limit_text(doc.min) + ".." + limit_text(doc.max); }

void check_option_range(std::string_view key, double value) {
  const OptionDoc& doc = option_doc(key);
  if (!doc.has_range()) throw InternalError(fmt::format("option '{}' has no documented range", key));
  if (value >= doc.min && value <= doc.max) return;  // NaN fails both
  throw UsageError(std::string(option_name(key)),
                   fmt::format("{} is outside {} ({})", limit_text(value), range_text(doc), doc.meaning));
}

std::string number_text_problem(const std::string& text, double lo, double hi, bool whole, const std::string& meaning) {
  const std::string range = limit_text(lo) + ".." + limit_text(hi);
  const std::string tail = meaning.empty() ? "" : " (" + meaning + ")";
  const bool has_digit = text.find_first_of("0123456789") != std::string::npos;
  const bool decimal = !text.empty() && has_digit &&
                       text.find_first_not_of(whole ? "+-0123456789" : "+-0123456789.eE") == std::string::npos;
  if (!decimal) {
    const bool hex = text.find_first_of("xX") != std::string::npos && has_digit;
    const bool fraction = whole && text.find_first_not_of("+-0123456789.eE") == std::string::npos && has_digit;
    return fmt::format("'{}' is {}; give {} in {}{}", text,
                       hex ? "hexadecimal" : fraction ? "not a whole number" : "not a number",
                       hex ? "a decimal number" : whole ? "a whole number" : "one", range, tail);
  }
  errno = 0;
  const char* begin = text.c_str();
  char* end = nullptr;
  if (whole) {
    const bool negative = text[0] == '-';
    if (negative && lo >= 0) return fmt::format("{} is outside {}{}", text, range, tail);
    long double v = 0;
    if (negative) {
      v = static_cast<long double>(std::strtoll(begin, &end, 10));
    } else {
      v = static_cast<long double>(std::strtoull(begin, &end, 10));
    }
    if (end != begin + text.size()) return fmt::format("'{}' is not a whole number; give one in {}{}", text, range, tail);
    if (errno == ERANGE || v < static_cast<long double>(lo) || v > static_cast<long double>(hi))
      return fmt::format("{} is outside {}{}", text, range, tail);
    return "";
  }
  const double v = std::strtod(begin, &end);
  if (end != begin + text.size() || !std::isfinite(v))
    return fmt::format("'{}' is not a number; give one in {}{}", text, range, tail);
  if (errno == ERANGE && std::fabs(v) < 1.0)
    return fmt::format("{} is too small to be told from 0 (the smallest normal number is 2.2e-308); give 0 or a value "
                       "in {}{}",
                       text, range, tail);
  if (errno == ERANGE || v < lo || v > hi) return fmt::format("{} is outside {}{}", text, range, tail);
  return "";
}

std::optional<long long> parse_whole_number(const std::string& text) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return n;
}

std::string moved_option_note(std::string_view command, std::string_view arg) {
  const std::string_view given = arg.substr(0, arg.find('='));
  if (given.find_first_not_of('-') != 2 || given.substr(2) != "steps") return "";
  struct Moved {
    std::string_view command, key, meaning;
  };
  static constexpr Moved kMoved[] = {
      {"search", "measure_steps", "the timed steps of each trial"},
      {"probe", "measure_steps", "the timed steps of the probe"},
      {"memory", "leak_check_steps", "the steps of the leak check"},
  };
  for (const Moved& m : kMoved)
    if (m.command == command)
      return fmt::format("{} is saturate train's count of optimizer steps (`max_steps`); in saturate {} {} are `{}`",
                         given, m.command, m.meaning, m.key);
  return "";
}

}  // namespace saturate

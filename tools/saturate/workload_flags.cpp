#include <iostream>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/version.h>

#include "commands.h"
#include "flag_checks.h"
#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/option_text.h"
#include "saturate/core/output_file.h"
#include "saturate/core/units.h"

namespace saturate::cli {

void add_workload_flags(CLI::App& app, WorkloadFlags& f) {
  app.add_option("--model,-m", f.model, "mlp | convnet | resnet18 | resnet50 | gpt | FILE.pt (TorchScript)")
      ->capture_default_str()->envname("SATURATE_MODEL");
  app.add_option("--device", f.device, "auto | cpu | cuda | cuda:N (auto: cuda:0 when present, else cpu)")
      ->capture_default_str()->envname("SATURATE_DEVICE");
  app.add_option("--memory-budget", f.memory_budget,
                 "memory the run may use: 512MiB, 2GiB, 1.5GB, bytes, or a fraction of the device (0.9); "
                 "default 4GiB on CPU, the whole GPU on CUDA")
      ->envname("SATURATE_MEMORY_BUDGET");
  app.add_option("--input", f.input, "one sample's shape, e.g. 3x224x224 (default 1x28x28; 3x224x224 for resnets)");
  app.add_option("--classes", f.classes, "output classes (default 10; 1000 for resnets)")->check(in_range(2, 1e7, "output classes"));
  app.add_option("--layers", f.layers, "gpt: transformer blocks (4); mlp: hidden layers (3)")->check(in_range(1, 10000, "layers"));
  app.add_option("--width", f.width, "gpt: embedding width (256); mlp: hidden width (1024)")->check(in_range(1, 1e7, "units"));
  app.add_option("--heads", f.heads, "gpt: attention heads (4)")->check(in_range(1, 4096, "attention heads"));
  app.add_option("--seq-len", f.seq_len, "gpt / --tokens: tokens per sample (128); on a .pt it implies --tokens")->check(in_range(1, 1e7, "tokens"));
  app.add_option("--vocab", f.vocab, "gpt / --tokens: vocabulary size (8192); on a .pt it implies --tokens")->check(in_range(2, 1e9, "tokens"));
  app.add_flag("--tokens", f.tokens, "the TorchScript model takes token ids [batch, seq-len] (--seq-len, --vocab)");
  app.add_option("--optimizer", f.optimizer, "sgd | adam | adamw (Adam keeps two state tensors per parameter)")
      ->capture_default_str();
  app.add_option("--lr", f.lr, "learning rate (default 0.01 for sgd, 1e-3 for adam/adamw)")->check(in_range(0, 1e6, "a learning rate; 0: the optimizer's default"));
  app.add_option("--seed", f.seed, "seed for weights and synthetic data")->capture_default_str();
  app.add_option("--threads", f.threads, "CPU threads for LibTorch (default: LibTorch's choice)")->check(thread_count("CPU threads; 0: LibTorch's choice"))
      ->envname("SATURATE_THREADS");
  app.add_option("--json", f.json, "also write the result as JSON to FILE ('-': stdout, replacing the table)");
}

std::optional<std::string> find_flag_for_option(const std::string& option) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"micro_batch", "--batch"},           {"accumulation", "--accumulate"},
      {"global_batch", "--global-batch"},   {"world_size", "the world size (WORLD_SIZE)"},
      {"precision", "--precision"},         {"checkpointing", "--checkpointing"},
      {"clip_grad_norm", "--clip-grad-norm"}, {"eval_batch", "--eval-batch"},
      {"prefetched_batches", "--workers x --prefetch"},
      {"objective", "--objective"},         {"base_batch", "--base-batch"},
      {"adapt_every", "--adapt-every"},     {"max_units", "--adaptive-max"},
      {"eval_every", "--eval-every-samples"}, {"noise_scale", "--noise-scale"},
      {"knee_fraction", "--knee"},          {"adaptive", "--adaptive"},
      {"noise_steps", "--noise-steps"},     {"strategy", "--strategy"},
      {"target_fraction", "--target-memory"}, {"max_batch", "--max-batch"},
      {"start_batch", "--start-batch"},     {"measure_steps", "--timed-steps"},
      {"confirm_runs", "--confirm"},        {"plan_for", "--plan-for"},
      {"plan_allocator", "--plan-allocator"}, {"plan_batches", "--plan-batches"},
      {"backend", "--backend"},             {"dist_timeout", "--dist-timeout"},
      {"nproc_per_node", "--nproc-per-node"}, {"kill_grace", "--kill-grace"},
      {"nnodes", "--nnodes"},               {"master_port", "--master-port"},
      {"lr_schedule", "--lr-schedule"},     {"lr_scaling", "--lr-scaling"},
      {"model", "--model"},                 {"sample_hz", "--sample-hz"},
      {"device", "--device"},               {"optimizer", "--optimizer"},
      {"val_fraction", "--val-fraction"},   {"seq_len", "--seq-len"},
      // train (session/train_session.h, session/train_ranks.h)
      {"loss_every", "--loss-every"},       {"max_steps", "--optimizer-steps"},
      {"checkpoint_every", "--checkpoint-every"}, {"stop_at_accuracy", "--stop-at-accuracy"},
      {"bucket_mb", "--bucket-mb"},         {"seed", "--seed"},
      {"compare_checkpointing", "--checkpointing auto"}, {"keep_loss", "--keep-loss"},
      {"leak_check_steps", "--leak-check-steps"}, {"threads", "--threads"}, {"required_batch", "--required-batch"},
      // options that library messages name mid-sentence (`data`): name_options
      {"classes", "--classes"},             {"layers", "--layers"},
      {"width", "--width"},                 {"heads", "--heads"},
      {"vocab", "--vocab"},                 {"tokens", "--tokens"},
      {"input", "--input"},                 {"data", "--data"},
      {"workers", "--workers"},             {"prefetch", "--prefetch"},
      {"drop_last", "--drop-last"},         {"skip_bad_samples", "--skip-bad-samples"},
      {"memory_budget", "--memory-budget"}, {"lr", "--lr"},
      {"warmup_steps", "--lr-warmup-steps"},   {"optimizer_steps", "--optimizer-steps"},
      {"epochs", "--epochs"},               {"resume", "--resume"},
      {"checkpoint_dir", "--checkpoint-dir"}, {"save", "--save"},
      {"json", "--json"},                   {"format", "--format"},
      {"trace", "--trace"},                 {"timeline", "--timeline"},
      {"no_monitor", "--no-monitor"},       {"log_every", "--log-every"},
      {"plan_only", "--plan-only"},         {"fast_paths", "--fast-paths"},
      {"parallel", "--parallel"},           {"pid", "--pid"},
      {"node_rank", "--node-rank"},         {"master_addr", "--master-addr"}};
  for (const auto& [name, flag] : kFlags)
    if (option == name) return std::string(flag);
  return std::nullopt;
}

std::string flag_for_option(const std::string& option) { return find_flag_for_option(option).value_or(option); }

std::string with_flags(const std::string& message) { return name_options(message, find_flag_for_option); }

std::unique_ptr<Session> open_session(const WorkloadFlags& f) {
  // a folder or a missing folder at --json is bad input: say so before the work, not after
  if (!f.json.empty() && f.json != "-") check_output_path(f.json, {"--json", "result.json"});
  WorkloadOptions o;
  o.model.name = f.model;
  if (!f.input.empty()) o.model.input_shape = parse_shape(f.input, "--input");
  o.model.classes = f.classes;
  o.model.layers = f.layers;
  o.model.width = f.width;
  o.model.heads = f.heads;
  o.model.seq_len = f.seq_len;
  o.model.vocab = f.vocab;
  o.model.tokens = f.tokens;
  o.model.seed = f.seed;
  o.device = f.device;
  o.memory_budget = f.memory_budget;
  o.optimizer = f.optimizer;
  o.lr = f.lr;
  o.threads = f.threads;
  return open_workload(o);
}

}  // namespace saturate::cli

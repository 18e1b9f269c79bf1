// Implements: the workload every session runs on, opened from options (what `saturate probe`,
// `search`, `memory` and `train` build from --model, --device, --memory-budget, ...; Python's
// zoo-model calls the same): the device, its meter with the budget applied after the model is on
// it (parameters count against the budget too), the built or loaded model with its optimizer,
// and the run context reports print. Usage errors name the option before any device work.
#pragma once
#include <memory>
#include <string>

#include "saturate/core/memory_meter.h"
#include "saturate/dist/env.h"
#include "saturate/models/zoo.h"
#include "saturate/report/run_context.h"
#include "saturate/step/workload.h"

namespace saturate {

struct WorkloadOptions {
  /// The model: a zoo name (mlp, convnet, resnet18, resnet50, gpt) or a TorchScript file, with
  /// its shape options (0 or empty: the model's defaults) and the seed of its weights.
  ModelSpec model;
  /// device: auto | cpu | cuda | cuda:N (auto: cuda:0 when present, else cpu).
  std::string device = "auto";
  /// memory_budget: "512MiB", "2GiB", bytes, or a fraction of the device ("0.9"); "": 4 GiB on
  /// CPU, the whole GPU on CUDA.
  std::string memory_budget;
  /// optimizer: sgd | adam | adamw; lr >= 0 (0: the optimizer's default).
  std::string optimizer = "adam";
  double lr = 0;
  /// threads >= 0: LibTorch's CPU threads (0: as they are, or from the load, below).
  int threads = 0;
  /// With threads 0 and no OMP_NUM_THREADS, on the CPU: the threads others leave free now
  /// (choose_cpu_threads; a measurement's timings then hold on a busy machine). Training keeps
  /// LibTorch's count (false): on the CPU another thread count is other bits, and two runs of one
  /// command, or a run and its resume, must give the same ones.
  bool threads_from_load = true;
};

struct WorkloadSession {
  c10::Device device{c10::DeviceType::CPU};
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  RunContext context;
  /// LibTorch's thread count before the session chose one from the load (0: it chose none), put
  /// back when the session ends: a library call (the Python zoo functions) leaves the process's
  /// threads as it found them.
  int threads_before = 0;

  WorkloadSession() = default;
  WorkloadSession(const WorkloadSession&) = delete;
  WorkloadSession& operator=(const WorkloadSession&) = delete;
  ~WorkloadSession();
};

/// Opens the workload. UsageError for bad options (naming them), RuntimeFailure when the model's
/// parameters alone exceed the budget.
std::unique_ptr<WorkloadSession> open_workload(const WorkloadOptions& options);

/// `memory_budget` as this rank reads it: "48MiB,32MiB" gives rank r the r-th value (as many
/// values as WORLD_SIZE, a UsageError otherwise: unequal GPUs, issue 28); one value is every rank's.
std::string rank_budget(const std::string& budgets, const DistEnv& env = read_dist_env());

}  // namespace saturate

// Flags and glue for data-parallel runs of search and train: --backend, --dist-timeout, the
// rendezvous from the environment (torchrun, saturate launch, mpirun, SLURM) and rank 0 output.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/dist/process_group.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/session/run_options.h"
#include "saturate/session/train_ranks.h"

namespace saturate::cli {

struct DistFlags {
  std::string backend = "auto";
  double timeout_s = 300;
  bool rank_max_exact = true;
  // train only
  double bucket_mb = 0;  // not given: 25 MiB, or tuned under --fast-paths auto|try
  std::string parallel = "ddp";
  std::string shares;  // each rank's samples of every global batch, "48,16"
  ShareBalanceOptions share_balance;  // --shares auto: re-split while training
};
void add_dist_flags(CLI::App& app, DistFlags& f, bool search);

/// Reads the rendezvous; when this process is one rank of several, sets a CUDA device to the
/// local rank's GPU (--device auto|cuda) and checks the flags. Call before open_session.
DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w);
/// Joins the process group (nullptr for one process).
std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device);

// ---- train ----------------------------------------------------------------------------------

/// Before open_session: reads the rendezvous, checks --backend, --dist-timeout, --bucket-mb and
/// --parallel (dp needs CUDA devices and one process), and picks the local rank's GPU.
TrainRanks prepare_train_ranks(const DistFlags& f, WorkloadFlags& w, const StepSettings& step);

}  // namespace saturate::cli

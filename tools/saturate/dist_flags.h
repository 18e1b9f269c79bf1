// Flags and glue for data-parallel runs of search and train: --backend, --dist-timeout, the
// rendezvous from the environment (torchrun, saturate launch, mpirun, SLURM) and rank 0 output.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/data/loader.h"
#include "saturate/dist/ddp.h"
#include "saturate/dist/data_parallel.h"
#include "saturate/dist/ddp_sync.h"
#include "saturate/dist/process_group.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/train/trainer.h"

namespace saturate::cli {

struct DistFlags {
  std::string backend = "auto";
  double timeout_s = 300;
  bool rank_max_exact = true;
  // train only
  double bucket_mb = 25;
  std::string parallel = "ddp";
};
void add_dist_flags(CLI::App& app, DistFlags& f, bool search);

/// Reads the rendezvous; when this process is one rank of several, sets a CUDA device to the
/// local rank's GPU (--device auto|cuda) and checks the flags. Call before open_session.
DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w);
/// Joins the process group (nullptr for one process).
std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device);


// ---- train ----------------------------------------------------------------------------------

/// The data-parallel side of one `saturate train` process: nothing for one process.
struct TrainRanks {
  DistEnv env;
  std::unique_ptr<DistGroup> group;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<DdpStepSync> sync;
  /// --parallel dp: the devices DataParallel replicates over (empty: none), and its hook.
  std::vector<c10::Device> dp_devices;
  std::unique_ptr<DataParallelSync> dp_sync;
  int rank() const { return env.rank; }
  int world_size() const { return env.world_size; }
  /// Rank 0 (or the only process) prints, writes the summary, the model and checkpoints.
  bool writer() const { return env.rank == 0; }
};

/// Before open_session: reads the rendezvous, checks --backend, --dist-timeout, --bucket-mb and
/// --parallel (dp needs CUDA devices and one process), and picks the local rank's GPU.
TrainRanks prepare_train_ranks(const DistFlags& f, WorkloadFlags& w);
/// --parallel dp: replicates the workload's model over ranks.dp_devices (DataParallelModel) and
/// sets the Trainer's hook; nothing without dp devices.
void setup_data_parallel(TrainRanks& ranks, Workload& workload, TrainOptions& o);
/// After open_session: joins the process group (several ranks; a collective).
void connect_train_ranks(TrainRanks& ranks, const DistFlags& f, const c10::Device& device);
/// For several ranks: each rank's loader reads its own shard (reshuffled identically per epoch),
/// DDP wraps the model (a collective), the Trainer syncs through it, only rank 0 writes
/// checkpoints. Call after the model is on its device, before the Trainer runs.
void setup_train_ranks(TrainRanks& ranks, const DistFlags& f, Model& model, LoaderOptions& loader, TrainOptions& o);
/// `world_size`, `backend`, `allreduce_ms` (per synced step), `allreduce_overlap_fraction`,
/// `gradient_buckets` and `gradient_bytes` for the train summary (printed by report/train_text.h).
void add_train_rank_json(nlohmann::json& j, TrainRanks& ranks);

}  // namespace saturate::cli

// Implements: where this process sits in a data-parallel job, read from the environment the
// way the usual launchers set it, in one function:
//  - torchrun / `saturate launch`: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
//    MASTER_ADDR, MASTER_PORT;
//  - mpirun (Open MPI): OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE; MPICH and
//    Intel MPI: PMI_RANK / PMI_SIZE;
//  - SLURM (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//    SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE, SLURM_STEP_NODELIST / SLURM_JOB_NODELIST.
// torchrun's variables win when several launchers are nested (srun running torchrun). Under
// mpirun and SLURM the rendezvous address comes from MASTER_ADDR when set, else the first
// SLURM node, else loopback on a single node; the port from MASTER_PORT, else 29500.
// Missing or inconsistent values are usage errors naming the variable, the value, what is
// allowed and the fix. No LibTorch here.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace saturate {

enum class Launcher { kNone, kTorchrun, kMpi, kSlurm };
/// "none" | "torchrun" | "mpi" | "slurm".
std::string to_string(Launcher l);

struct DistEnv {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  /// The variable that gave world_size ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", ...),
  /// to name it when the ranks disagree.
  std::string world_size_var = "WORLD_SIZE";
  /// Rendezvous host (the TCPStore's); "127.0.0.1" unless the environment names another.
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// torchrun's agent already hosts the TCPStore on MASTER_ADDR:MASTER_PORT
  /// (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 connects to it instead of serving one.
  bool agent_store = false;
  /// torchrun's restart count (TORCHELASTIC_RESTART_COUNT): the agent's store outlives an
  /// attempt, so each attempt's rendezvous keys live under their own prefix.
  int restart_count = 0;
  /// More than one process: a process group is needed.
  bool distributed() const { return world_size > 1; }
  /// "rank 1/4 (local 1/2, node 0) via torchrun, rendezvous 127.0.0.1:29500".
  std::string describe() const;
};

/// Returns the value of an environment variable, or nothing when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
/// The process's own environment (getenv).
EnvLookup process_environment();

/// Reads the rendezvous from the environment. No launcher variables: a single process
/// (world_size 1). Throws UsageError for missing or inconsistent values.
DistEnv read_dist_env(const EnvLookup& env = process_environment());

/// First host of a SLURM node list: "node[03-05,9]" -> "node03", "a,b" -> "a".
std::string first_slurm_host(const std::string& nodelist);

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_address(const std::string& host);

}  // namespace saturate

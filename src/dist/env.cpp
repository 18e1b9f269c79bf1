// Rendezvous from the environment: torchrun, mpirun and SLURM variables (see dist/env.h).
#include "saturate/dist/env.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

constexpr const char* kLaunchHint = "start the ranks with `saturate launch` or torchrun, which set them all";

struct Reader {
  const EnvLookup& env;

  std::optional<std::string> raw(const std::string& name) const {
    auto v = env(name);
    if (v && v->empty()) return std::nullopt;  // an empty variable counts as unset
    return v;
  }
  bool has(const std::string& name) const { return raw(name).has_value(); }

  /// An integer >= `min`; `allowed` says what is expected in the message.
  std::optional<int> integer(const std::string& name, int min, const std::string& allowed) const {
    auto v = raw(name);
    if (!v) return std::nullopt;
    const std::string& s = *v;
    size_t i = 0;
    bool ok = !s.empty();
    if (ok && (s[0] == '-' || s[0] == '+')) i = 1;
    ok = ok && i < s.size();
    for (size_t k = i; ok && k < s.size(); ++k) ok = std::isdigit(static_cast<unsigned char>(s[k])) != 0;
    long long n = 0;
    if (ok) {
      errno = 0;
      n = std::strtoll(s.c_str(), nullptr, 10);
      ok = errno == 0 && n >= -2147483648LL && n <= 2147483647LL;
    }
    if (!ok) throw UsageError(fmt::format("{}='{}': not an integer (expected {})", name, s, allowed));
    if (n < min) throw UsageError(fmt::format("{}={}: out of range (expected {})", name, n, allowed));
    return static_cast<int>(n);
  }

  int required(const std::string& name, int min, const std::string& allowed, const std::string& why) const {
    auto v = integer(name, min, allowed);
    if (!v) throw UsageError(fmt::format("{} is not set but {} (expected {}); {}", name, why, allowed, kLaunchHint));
    return *v;
  }
};

/// Leading count of SLURM's "2(x3),1" task lists: the tasks on this node's group.
std::optional<int> slurm_tasks_per_node(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) return std::nullopt;
  return std::atoi(text.substr(0, i).c_str());
}

void check_consistent(const DistEnv& e, const std::string& rank_var, const std::string& size_var,
                      const std::string& local_var, const std::string& local_size_var) {
  if (e.rank >= e.world_size)
    throw UsageError(fmt::format("{}={}: not below {}={} (expected 0..{}); give each process a distinct {} "
                                 "below {}, or {}",
                                 rank_var, e.rank, size_var, e.world_size, e.world_size - 1, rank_var, size_var,
                                 kLaunchHint));
  if (e.local_world_size > e.world_size)
    throw UsageError(fmt::format("{}={}: larger than {}={} (expected 1..{}); a node cannot run more ranks than "
                                 "the job has",
                                 local_size_var, e.local_world_size, size_var, e.world_size, e.world_size));
  if (e.local_rank >= e.local_world_size)
    throw UsageError(fmt::format("{}={}: not below {}={} (expected 0..{}); give each process on a node a "
                                 "distinct {}, or {}",
                                 local_var, e.local_rank, local_size_var, e.local_world_size,
                                 e.local_world_size - 1, local_var, kLaunchHint));
}

void read_master(const Reader& r, DistEnv& e, bool addr_required) {
  if (auto a = r.raw("MASTER_ADDR")) {
    e.master_addr = *a;
  } else if (addr_required) {
    throw UsageError(fmt::format(
        "MASTER_ADDR is not set but WORLD_SIZE={} spans {} nodes (expected the host name or address of rank 0); "
        "export MASTER_ADDR=<rank 0's host>",
        e.world_size, e.world_size / std::max(1, e.local_world_size)));
  }
  if (auto p = r.integer("MASTER_PORT", 1, "a TCP port in 1..65535")) {
    if (*p > 65535) throw UsageError(fmt::format("MASTER_PORT={}: out of range (expected a TCP port in 1..65535)", *p));
    e.master_port = *p;
  }
}

}  // namespace

std::string to_string(Launcher l) {
  switch (l) {
    case Launcher::kNone: return "none";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kMpi: return "mpi";
    case Launcher::kSlurm: return "slurm";
  }
  return "?";
}

std::string DistEnv::describe() const {
  return fmt::format("rank {}/{} (local {}/{}, node {}) via {}, rendezvous {}:{}", rank, world_size, local_rank,
                     local_world_size, node_rank, to_string(launcher), master_addr, master_port);
}

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::string first_slurm_host(const std::string& nodelist) {
  // "pre[03-05,9]suf,other" -> "pre03suf"
  std::string out;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] == '[') {
      size_t j = i + 1;
      while (j < nodelist.size() && nodelist[j] != ',' && nodelist[j] != '-' && nodelist[j] != ']') out += nodelist[j++];
      i = nodelist.find(']', i);
      if (i == std::string::npos) break;
      ++i;
      continue;
    }
    out += nodelist[i++];
  }
  return out;
}

bool is_loopback_address(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

namespace {

/// torchrun (and saturate launch): RANK, WORLD_SIZE, the local pair, MASTER_ADDR/PORT.
DistEnv read_torchrun_env(const Reader& r) {
  DistEnv e;
  e.launcher = Launcher::kTorchrun;
  e.world_size = r.required("WORLD_SIZE", 1, "a positive count of processes", "RANK or LOCAL_RANK is");
  e.rank = r.required("RANK", 0, fmt::format("0..{}", e.world_size - 1), "WORLD_SIZE or LOCAL_RANK is");
  // torchrun always sets the local pair; a hand-made environment on one node may leave it out.
  e.local_world_size = r.integer("LOCAL_WORLD_SIZE", 1, "a positive count of processes on this node")
                           .value_or(e.world_size);
  e.local_rank =
      r.integer("LOCAL_RANK", 0, fmt::format("0..{}", e.local_world_size - 1)).value_or(e.rank % e.local_world_size);
  check_consistent(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  e.node_rank = r.integer("GROUP_RANK", 0, "0 or more").value_or(e.rank / e.local_world_size);
  if (e.world_size > 1 && !r.has("MASTER_ADDR"))
    throw UsageError(fmt::format(
        "MASTER_ADDR is not set but WORLD_SIZE={} (expected the host name or address of rank 0, e.g. 127.0.0.1 "
        "on one machine); export MASTER_ADDR and MASTER_PORT, or {}",
        e.world_size, kLaunchHint));
  if (e.world_size > 1 && !r.has("MASTER_PORT"))
    throw UsageError(fmt::format(
        "MASTER_PORT is not set but WORLD_SIZE={} (expected a free TCP port on rank 0's host, e.g. 29500); "
        "export MASTER_PORT, or {}",
        e.world_size, kLaunchHint));
  read_master(r, e, false);
  e.agent_store = r.raw("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  e.restart_count = r.integer("TORCHELASTIC_RESTART_COUNT", 0, "0 or more").value_or(0);
  return e;
}

/// An MPI launcher's variables: Open MPI's OMPI_COMM_WORLD_*, or MPICH's and Intel MPI's PMI_*.
struct MpiVars {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* node_rank;  ///< nullptr: rank / local size
};

DistEnv read_mpi_env(const Reader& r, const MpiVars& v) {
  DistEnv e;
  e.launcher = Launcher::kMpi;
  e.world_size_var = v.size;
  e.world_size = r.required(v.size, 1, "a positive count of processes", fmt::format("{} is", v.rank));
  e.rank = r.required(v.rank, 0, fmt::format("0..{}", e.world_size - 1), fmt::format("{} is", v.size));
  e.local_world_size = r.integer(v.local_size, 1, "a positive count").value_or(e.world_size);
  e.local_rank = r.integer(v.local_rank, 0, fmt::format("0..{}", e.local_world_size - 1))
                     .value_or(e.rank % e.local_world_size);
  check_consistent(e, v.rank, v.size, v.local_rank, v.local_size);
  e.node_rank = v.node_rank ? r.integer(v.node_rank, 0, "0 or more").value_or(e.rank / e.local_world_size)
                            : e.rank / e.local_world_size;
  read_master(r, e, e.local_world_size < e.world_size);
  return e;
}

constexpr MpiVars kOpenMpi{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"};
constexpr MpiVars kPmi{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr};

/// srun: SLURM_PROCID, SLURM_NTASKS, the tasks per node; rank 0 the first host of the step.
DistEnv read_slurm_env(const Reader& r) {
  DistEnv e;
  e.launcher = Launcher::kSlurm;
  e.world_size_var = "SLURM_NTASKS";
  e.world_size = r.required("SLURM_NTASKS", 1, "a positive count of tasks", "SLURM_PROCID is");
  e.rank = r.required("SLURM_PROCID", 0, fmt::format("0..{}", e.world_size - 1), "SLURM_NTASKS is");
  std::optional<int> per_node;
  if (auto t = r.raw("SLURM_NTASKS_PER_NODE")) per_node = slurm_tasks_per_node(*t);
  if (!per_node)
    if (auto t = r.raw("SLURM_TASKS_PER_NODE")) per_node = slurm_tasks_per_node(*t);
  e.local_world_size = per_node.value_or(e.world_size);
  if (e.local_world_size < 1)
    throw UsageError(fmt::format("SLURM_TASKS_PER_NODE: {} tasks per node (expected at least 1)",
                                 e.local_world_size));
  e.local_rank = r.integer("SLURM_LOCALID", 0, fmt::format("0..{}", e.local_world_size - 1))
                     .value_or(e.rank % e.local_world_size);
  check_consistent(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_TASKS_PER_NODE");
  e.node_rank = r.integer("SLURM_NODEID", 0, "0 or more").value_or(e.rank / e.local_world_size);
  if (!r.has("MASTER_ADDR")) {
    auto nodes = r.raw("SLURM_STEP_NODELIST");
    if (!nodes) nodes = r.raw("SLURM_JOB_NODELIST");
    if (nodes && e.local_world_size < e.world_size) e.master_addr = first_slurm_host(*nodes);
  }
  read_master(r, e, false);
  return e;
}

}  // namespace

DistEnv read_dist_env(const EnvLookup& env) {
  Reader r{env};
  if (r.has("RANK") || r.has("WORLD_SIZE") || r.has("LOCAL_RANK") || r.has("LOCAL_WORLD_SIZE"))
    return read_torchrun_env(r);
  if (r.has("OMPI_COMM_WORLD_RANK") || r.has("OMPI_COMM_WORLD_SIZE")) return read_mpi_env(r, kOpenMpi);
  if (r.has("PMI_RANK") || r.has("PMI_SIZE")) return read_mpi_env(r, kPmi);
  if (r.has("SLURM_PROCID")) return read_slurm_env(r);
  return DistEnv{};  // one process
}

}  // namespace saturate

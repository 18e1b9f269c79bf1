// Implements: a c10d process group for this job, built from the rendezvous in the environment.
// Rank 0 hosts a c10d::TCPStore on MASTER_ADDR:MASTER_PORT, bound to that address only (to
// loopback unless another address is given); every rank connects, records its rank, world size,
// host and pid in the store, rank 0 says "ok" once every rank has, and every rank builds the
// backend: Gloo on CPU, NCCL on CUDA (`auto`), wrapped in a c10d::ProcessGroup, which is what
// c10d's Reducer (DDP) takes. The timeout (default 5 minutes, not NCCL's 30) bounds every phase:
// the rendezvous fails in one line naming the rank, the address and the cause (unreachable,
// ranks missing, a rank 0 that stopped answering; a world size or RANK the ranks disagree on
// fails at once as a UsageError naming both); collectives fail with a RuntimeFailure naming the
// ranks that are gone.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "saturate/core/errors.h"
#include "saturate/dist/collectives.h"
#include "saturate/dist/env.h"
#include "saturate/dist/net_interface.h"

namespace c10d {
class ProcessGroup;
class Store;
}  // namespace c10d

namespace saturate {

enum class DistBackend { kAuto, kGloo, kNccl };
/// "auto" | "gloo" | "nccl".
std::string to_string(DistBackend b);
/// Throws UsageError naming --backend otherwise.
DistBackend parse_dist_backend(const std::string& text);

struct DistOptions {
  /// auto: nccl on a CUDA device, gloo on the CPU.
  DistBackend backend = DistBackend::kAuto;
  /// How long a rendezvous or a collective may wait for the other ranks.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class DistGroup final : public Collectives {
 public:
  /// Connects this rank; blocks until every rank has joined or the timeout passes (plus a few
  /// seconds of slack when rank 0's store stops answering). Throws RuntimeFailure or UsageError
  /// ("rank R/W: rendezvous failed: ..."); c10d's own logs are silenced meanwhile.
  /// `cuda` says the training device is a GPU (`device_index` the local one).
  static std::unique_ptr<DistGroup> connect(const DistEnv& env, const DistOptions& options, bool cuda,
                                            int device_index = 0);
  ~DistGroup() override;

  int rank() const override { return env_.rank; }
  int world_size() const override { return env_.world_size; }
  const DistEnv& env() const { return env_; }
  /// gloo or nccl (never auto).
  DistBackend backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The interface this rank's peers reach it by (none: every rank on this host, over loopback).
  const std::optional<NetInterface>& interface() const { return interface_; }

  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& values) override;
  std::vector<int64_t> all_gather(const std::vector<int64_t>& values) override;
  /// Element-wise sum over all ranks, in double precision; every rank gets the result.
  std::vector<double> all_reduce_sum(const std::vector<double>& values);
  void barrier();

  /// c10d's process group (for the Reducer and tensor collectives).
  const c10::intrusive_ptr<c10d::ProcessGroup>& c10d_group() const { return group_; }

  /// "rank 1 (pid 4242 on host) has exited" for the ranks on this host that are gone, else
  /// a hint that a rank failed or timed out; used to explain a failed collective.
  std::string describe_missing_ranks() const;
  /// A RuntimeFailure for a collective `what` that failed with `error`, naming the lost ranks.
  RuntimeFailure failure(const std::string& what, const std::string& error) const;

 private:
  DistGroup(DistEnv env, DistBackend backend, std::chrono::milliseconds timeout);
  /// All-reduces `host` (a CPU tensor) on the group's device, by maximum or sum; the result on the CPU.
  torch::Tensor all_reduce_on_host(torch::Tensor host, bool maximum);
  DistEnv env_;
  DistBackend backend_;
  std::chrono::milliseconds timeout_;
  bool cuda_ = false;
  int device_index_ = 0;
  std::optional<NetInterface> interface_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  struct Peer {
    std::string host;
    int64_t pid = 0;
  };
  std::vector<Peer> peers_;
};

}  // namespace saturate

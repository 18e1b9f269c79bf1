// The job's c10d process group: TCPStore rendezvous, Gloo or NCCL backend, integer collectives
// and the messages that name a lost rank (see dist/process_group.h).
#include "saturate/dist/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
// the wheel ships ProcessGroupGloo.hpp but not Gloo's own headers: Debian's libgloo-dev gives
// them (scripts/setup.sh); the class only holds Gloo objects by pointer, so any version parses.
#if __has_include(<gloo/algorithm.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define SATURATE_HAVE_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "saturate/core/errors.h"

namespace saturate {

// nccl_backend_cuda.cpp, compiled when LibTorch has CUDA and the NCCL header is found.
#ifdef SATURATE_WITH_NCCL
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout, int device_index);
#endif

namespace {

/// An exception's message without c10's C++ backtrace (users get one line).
std::string error_text(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  return c10 ? c10->what_without_backtrace() : e.what();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

/// A listening socket on host:port (rank 0's store), so the store binds to that address only.
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0)
    throw UsageError(fmt::format("MASTER_ADDR={}: cannot resolve it ({}); give rank 0's host name or address",
                                 host, gai_strerror(rc)));
  std::string last_error = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    last_error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  throw RuntimeFailure(fmt::format("rendezvous: cannot listen on {}:{} ({}); pick a free MASTER_PORT "
                                   "(--master-port) or end the process that holds it",
                                   host, port, last_error));
}

/// Is `pid` on this host gone (no such process, or a zombie waiting for its parent)?
bool process_gone(int64_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  if (!stat) return true;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return false;
  const char state = text[close_paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

std::string to_string(DistBackend b) {
  switch (b) {
    case DistBackend::kAuto: return "auto";
    case DistBackend::kGloo: return "gloo";
    case DistBackend::kNccl: return "nccl";
  }
  return "?";
}

DistBackend parse_dist_backend(const std::string& text) {
  if (text == "auto") return DistBackend::kAuto;
  if (text == "gloo") return DistBackend::kGloo;
  if (text == "nccl") return DistBackend::kNccl;
  throw UsageError(fmt::format("--backend: unknown value '{}' (expected auto, nccl or gloo)", text));
}

DistGroup::DistGroup(DistEnv env, DistBackend backend, std::chrono::milliseconds timeout)
    : env_(std::move(env)), backend_(backend), timeout_(timeout) {}

DistGroup::~DistGroup() = default;

std::unique_ptr<DistGroup> DistGroup::connect(const DistEnv& env, const DistOptions& options, bool cuda,
                                              int device_index) {
  DistBackend backend = options.backend;
  if (backend == DistBackend::kAuto) backend = cuda ? DistBackend::kNccl : DistBackend::kGloo;
  if (backend == DistBackend::kNccl && !cuda)
    throw UsageError("--backend nccl: NCCL needs a CUDA device but the device is the CPU (expected gloo or auto "
                     "with --device cpu); use --backend gloo");
#ifndef SATURATE_HAVE_GLOO
  if (backend == DistBackend::kGloo)
    throw UsageError("--backend gloo: this build has no Gloo (its headers were missing at build time: install "
                     "libgloo-dev, as scripts/setup.sh does, and rebuild)");
#endif
#ifndef SATURATE_WITH_NCCL
  if (backend == DistBackend::kNccl)
    throw UsageError("--backend nccl: this build has no NCCL (LibTorch without CUDA, or nccl.h was not found at "
                     "build time); use --backend gloo");
#endif
  if (options.timeout.count() <= 0)
    throw UsageError(fmt::format("--dist-timeout: {} ms is not positive; give e.g. 300 (seconds)",
                                 options.timeout.count()));
  std::unique_ptr<DistGroup> g(new DistGroup(env, backend, options.timeout));
  g->cuda_ = cuda;
  g->device_index_ = device_index;

  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env.master_port);
  so.isServer = env.rank == 0 && !env.agent_store;
  so.numWorkers = static_cast<size_t>(env.world_size);
  so.waitWorkers = true;
  so.timeout = options.timeout;
  if (so.isServer) so.masterListenFd = listen_on(env.master_addr, env.master_port);
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    throw RuntimeFailure(fmt::format("rendezvous at {}:{} failed for rank {}/{} within {} s: {}", env.master_addr,
                                     env.master_port, env.rank, env.world_size, options.timeout.count() / 1000.0,
                                     error_text(e)));
  }
  g->store_ = c10::make_intrusive<c10d::PrefixStore>("saturate", tcp);

  // every rank's host and pid, to name the ones that are gone when a collective fails.
  const std::string me = fmt::format("{} {}", host_name(), static_cast<int64_t>(getpid()));
  g->store_->set(fmt::format("proc/{}", env.rank), std::vector<uint8_t>(me.begin(), me.end()));
  for (int r = 0; r < env.world_size; ++r) {
    const auto v = g->store_->get(fmt::format("proc/{}", r));
    const std::string text(v.begin(), v.end());
    const auto space = text.rfind(' ');
    g->peers_.push_back({text.substr(0, space), std::stoll(text.substr(space + 1))});
  }

  auto pg_store = c10::make_intrusive<c10d::PrefixStore>("pg", g->store_);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(pg_store, env.rank, env.world_size);
  if (backend == DistBackend::kGloo) {
#ifdef SATURATE_HAVE_GLOO
    auto o = c10d::ProcessGroupGloo::Options::create(options.timeout);
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback_address(env.master_addr))
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    c10::intrusive_ptr<c10d::Backend> b;
    try {
      b = c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, env.rank, env.world_size, o);
    } catch (const std::exception& e) {
      throw g->failure("connecting the Gloo process group", error_text(e));
    }
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, b);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#endif
  } else {
#ifdef SATURATE_WITH_NCCL
    auto b = make_nccl_backend(pg_store, env.rank, env.world_size, options.timeout, device_index);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, b);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
  }
  g->group_ = group;
  return g;
}

torch::Tensor DistGroup::all_reduce_on_host(torch::Tensor host, bool maximum) {
  torch::Tensor t = cuda_ ? host.to(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index_))) : host;
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions o;
  o.reduceOp = maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  o.timeout = timeout_;
  try {
    group_->allreduce(ts, o)->wait(timeout_);
  } catch (const std::exception& e) {
    throw failure("all_reduce", error_text(e));
  }
  return ts[0].cpu().contiguous();
}

std::vector<int64_t> DistGroup::all_reduce_max(const std::vector<int64_t>& values) {
  const torch::Tensor out =
      all_reduce_on_host(torch::tensor(values, torch::TensorOptions().dtype(torch::kInt64)).clone(), /*maximum=*/true);
  return std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel());
}

std::vector<double> DistGroup::all_reduce_sum(const std::vector<double>& values) {
  const torch::Tensor out =
      all_reduce_on_host(torch::tensor(values, torch::TensorOptions().dtype(torch::kDouble)).clone(), /*maximum=*/false);
  return std::vector<double>(out.data_ptr<double>(), out.data_ptr<double>() + out.numel());
}

std::vector<int64_t> DistGroup::all_gather(const std::vector<int64_t>& values) {
  // as an all-reduce (MAX) of a zero-filled [world, n] table: one collective both backends do
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<int64_t> table(static_cast<size_t>(n * world_size()), std::numeric_limits<int64_t>::min());
  for (int64_t i = 0; i < n; ++i) table[static_cast<size_t>(rank() * n + i)] = values[static_cast<size_t>(i)];
  return all_reduce_max(table);
}

void DistGroup::barrier() {
  (void)all_reduce_max({0});
}

std::string DistGroup::describe_missing_ranks() const {
  const std::string me = host_name();
  std::vector<std::string> gone;
  bool others_elsewhere = false, local_peers = false;
  // the peer's socket closes while it is still exiting: give it a moment to leave /proc
  for (int attempt = 0; attempt < 30 && gone.empty(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (size_t r = 0; r < peers_.size(); ++r) {
      if (static_cast<int>(r) == rank()) continue;
      if (peers_[r].host != me) {
        others_elsewhere = true;
        continue;
      }
      local_peers = true;
      if (process_gone(peers_[r].pid))
        gone.push_back(fmt::format("rank {} (pid {} on {})", r, peers_[r].pid, peers_[r].host));
    }
    if (!local_peers) break;
  }
  if (!gone.empty()) {
    std::string list;
    for (size_t i = 0; i < gone.size(); ++i) list += (i ? ", " : "") + gone[i];
    return fmt::format("{} {} exited", list, gone.size() == 1 ? "has" : "have");
  }
  if (peers_.empty()) return "a rank did not join the rendezvous";
  return others_elsewhere ? "a rank on another host failed, or did not answer within the timeout"
                          : "a rank failed, or did not answer within the timeout";
}

RuntimeFailure DistGroup::failure(const std::string& what, const std::string& error) const {
  std::string first = error.substr(0, error.find('\n'));
  return RuntimeFailure(fmt::format("rank {}/{}: {} failed: {} ({}; --dist-timeout {} s)", rank(), world_size(), what,
                                    describe_missing_ranks(), first, timeout_.count() / 1000.0));
}

}  // namespace saturate

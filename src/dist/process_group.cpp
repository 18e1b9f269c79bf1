// The job's c10d process group: TCPStore rendezvous, Gloo or NCCL backend, integer collectives
// and the messages that name a lost rank (see dist/process_group.h).
#include "saturate/dist/process_group.h"

#include "saturate/core/stop_signals.h"
#include "dist/job_settings.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <c10/util/Logging.h>

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
                                   "(`master_port`) or end the process that holds it",
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

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds time_left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string seconds_text(milliseconds t) { return fmt::format("{}", static_cast<double>(t.count()) / 1000.0); }

/// Keeps c10's LOG(WARNING) and LOG(ERROR) quiet while alive: c10d logs each failed connect
/// attempt and timeout with the exception's what(), C++ backtrace included, before it throws;
/// our error says it once, in one line. Restores the level the process had (TORCH_CPP_LOG_LEVEL).
class QuietC10Logs {
 public:
  QuietC10Logs() : saved_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = std::max(saved_, c10::GLOG_FATAL); }
  ~QuietC10Logs() { FLAGS_caffe2_log_level = saved_; }
  QuietC10Logs(const QuietC10Logs&) = delete;
  QuietC10Logs& operator=(const QuietC10Logs&) = delete;

 private:
  int saved_;
};

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

/// Why a connection to host:port failed, in words, with the usual fix.
std::string connect_cause(int err) {
  switch (err) {
    case ECONNREFUSED:
      return "connection refused: nothing listens there; start rank 0 too, and give every rank the same "
             "MASTER_ADDR and MASTER_PORT";
    case ETIMEDOUT:
      return "no answer: a wrong MASTER_ADDR, a host that is down, or a firewall dropping the port";
    case EHOSTUNREACH:
    case ENETUNREACH:
      return fmt::format("{}: check MASTER_ADDR", std::strerror(err));
    default: return std::strerror(err);
  }
}

/// A stop signal (SIGINT, SIGTERM, SIGHUP under a command that stops gracefully) ends the
/// rendezvous's waits at once, not at the timeout.
void stop_if_signalled() {
  if (const int sig = stop_signal_received()) throw StoppedBySignal(sig, "the rendezvous (waiting for the other ranks)");
}

/// Opens (and closes) a TCP connection to host:port, retrying until `deadline`, so that an
/// unreachable rank 0 fails within the timeout (c10d's TCPStore client retries its own
/// connect loop after a first full timeout: 2x and more). Returns the empty string once a
/// connection opened, else why none did. A host name that does not resolve is a UsageError.
std::string reach(const std::string& host, int port, Clock::time_point deadline) {
  std::string cause = "no answer";
  const std::string port_text = std::to_string(port);
  for (milliseconds pause(50);; pause = std::min(pause * 2, milliseconds(500))) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
    if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_SERVICE)
      throw UsageError(fmt::format("MASTER_ADDR={}: cannot resolve it ({}); give rank 0's host name or address",
                                   host, gai_strerror(rc)));
    if (rc != 0) cause = fmt::format("cannot resolve {} ({})", host, gai_strerror(rc));
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        cause = std::strerror(errno);
        continue;
      }
      int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        // a dropped SYN can hang for minutes: wait at most what is left, and 5 s per attempt
        pollfd p{fd, POLLOUT, 0};
        const auto wait_ms = std::min(time_left(deadline), milliseconds(5000)).count();
        const int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(wait_ms, 1)));
        socklen_t len = sizeof(err);
        if (ready == 1) {
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        } else {
          err = ready == 0 ? ETIMEDOUT : errno;
        }
      }
      close(fd);
      if (err == 0) {
        freeaddrinfo(res);
        return "";
      }
      cause = connect_cause(err);
    }
    if (res) freeaddrinfo(res);
    const milliseconds left = time_left(deadline);
    if (left.count() == 0) return cause;
    stop_if_signalled();
    std::this_thread::sleep_for(std::min(pause, left));
  }
}

/// One rank's entry in the store: "rank world_size host pid".
struct JoinRecord {
  int rank = 0;
  int world_size = 0;
  std::string host;
  int64_t pid = 0;
  std::string who() const { return fmt::format("rank {} (pid {} on {})", rank, pid, host); }
};

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

JoinRecord parse_record(const std::vector<uint8_t>& v) {
  JoinRecord r;
  const std::string text(v.begin(), v.end());
  const auto a = text.find(' '), b = text.find(' ', a + 1), c = text.rfind(' ');
  if (a == std::string::npos || b == std::string::npos || c <= b)
    throw RuntimeFailure(fmt::format("rendezvous: unexpected entry '{}' in the store (another program on that "
                                     "MASTER_PORT?); pick a free MASTER_PORT",
                                     text));
  r.rank = std::stoi(text.substr(0, a));
  r.world_size = std::stoi(text.substr(a + 1, b - a - 1));
  r.host = text.substr(b + 1, c - b - 1);
  r.pid = std::stoll(text.substr(c + 1));
  return r;
}

/// Runs `work` on a thread of its own and waits for it until `limit`, then throws `late()`:
/// c10d's TCPStore waits for some replies without a timeout (a rank 0 that accepts connections
/// but never answers: stopped, frozen, or another program on MASTER_PORT), and a thread blocked
/// in recv cannot be interrupted. Past the limit the thread is left behind; `work` must own
/// (capture by value) everything it touches.
template <typename T>
T run_within(Clock::time_point limit, std::function<T()> work, const std::function<RuntimeFailure()>& late) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::optional<T> value;
    std::exception_ptr error;
  };
  auto out = std::make_shared<Outcome>();
  std::thread([out, work = std::move(work)] {
    std::optional<T> value;
    std::exception_ptr error;
    try {
      value.emplace(work());
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(out->mutex);
    out->value = std::move(value);
    out->error = error;
    out->done = true;
    out->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(out->mutex);
  if (!out->done_cv.wait_until(lock, limit, [&] { return out->done; })) throw late();
  if (out->error) std::rethrow_exception(out->error);
  return std::move(*out->value);
}

/// Polls for `key` until `deadline`; false when it did not appear in time.
bool wait_for_key(c10d::Store& store, const std::string& key, Clock::time_point deadline) {
  for (milliseconds pause(5);; pause = std::min(pause * 2, milliseconds(100))) {
    if (store.check({key})) return true;
    const milliseconds left = time_left(deadline);
    if (left.count() == 0) return false;
    stop_if_signalled();
    std::this_thread::sleep_for(std::min(pause, left));
  }
}

std::string record_text(const JoinRecord& r) {
  return fmt::format("{} {} {} {}", r.rank, r.world_size, r.host, r.pid);
}

/// The rendezvous: reaching rank 0's TCPStore, then every rank joining, before one deadline.
/// Every rank writes its entry (rank, world size, host, pid); rank 0 reads them as they come
/// and says "ok" (or why not) through the store. Failures are one line naming this rank, the
/// address and the cause; ranks that disagree on the world size, or share a RANK, fail at once.
class Rendezvous {
 public:
  Rendezvous(DistEnv env, milliseconds timeout) : env_(std::move(env)), timeout_(timeout) {}

  void run(Clock::time_point deadline) {
    connect(deadline);
    JoinRecord me;
    me.rank = env_.rank;
    me.world_size = env_.world_size;
    me.host = host_name();
    me.pid = static_cast<int64_t>(getpid());
    if (env_.rank == 0) {
      call([&] {
        store_->set("world_size", bytes(std::to_string(env_.world_size)));
        publish(me);
        return 0;
      });
      join_as_rank_zero(deadline, me);
    } else {
      join_as_other(deadline, me);
    }
    // every rank's host and pid, to name the ones that are gone when a collective fails.
    call([&] {
      for (int r = 0; r < env_.world_size; ++r) peers_.push_back(parse_record(store_->get(fmt::format("proc/{}", r))));
      return 0;
    });
  }

  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  const std::vector<JoinRecord>& peers() const { return peers_; }

  /// "rank 0 at ADDR:PORT" (or torchrun's agent store).
  std::string where() const {
    return fmt::format("{} at {}:{}", env_.agent_store ? "the launcher's store" : "rank 0", env_.master_addr,
                       env_.master_port);
  }
  /// "rank R/W: rendezvous failed: <reason>".
  std::string error(const std::string& reason) const {
    return fmt::format("rank {}/{}: rendezvous failed: {}", env_.rank, env_.world_size, reason);
  }

 private:
  std::string address() const { return fmt::format("{}:{}", env_.master_addr, env_.master_port); }

  /// Runs store operations; a failure of the store itself (rank 0 gone: connection reset or
  /// closed) becomes one line.
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const UsageError&) {
      throw;
    } catch (const RuntimeFailure&) {
      throw;
    } catch (const StoppedBySignal&) {
      throw;
    } catch (const std::exception& e) {
      throw RuntimeFailure(error(fmt::format("lost the connection to {} ({}); it failed or exited: see its message",
                                             where(), first_line(error_text(e)))));
    }
  }

  void connect(Clock::time_point deadline) {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(env_.master_port);
    so.isServer = env_.rank == 0 && !env_.agent_store;
    so.numWorkers = static_cast<size_t>(env_.world_size);
    so.waitWorkers = false;  // the join waits, naming who is missing and who disagrees
    so.timeout = timeout_;
    const auto unreachable = [&](const std::string& cause) {
      return RuntimeFailure(
          error(fmt::format("cannot reach {} within {} s ({})", where(), seconds_text(timeout_), cause)));
    };
    if (so.isServer) {
      so.masterListenFd = listen_on(env_.master_addr, env_.master_port);
    } else {
      std::string cause;
      try {
        cause = reach(env_.master_addr, env_.master_port, deadline);
      } catch (const UsageError& e) {
        throw UsageError(error(e.what()));
      }
      if (!cause.empty()) throw unreachable(cause);
      so.timeout = std::max(time_left(deadline), milliseconds(1000));
    }
    c10::intrusive_ptr<c10d::TCPStore> tcp;
    try {
      tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
    } catch (const std::exception& e) {
      throw unreachable(first_line(error_text(e)));
    }
    tcp->setTimeout(timeout_);  // for the backend's own exchanges
    // torchrun's agent keeps its store across restarts: a fresh prefix per attempt, so that no
    // key of an earlier attempt (an "ok", a rank's entry) is taken for this one's
    store_ = c10::make_intrusive<c10d::PrefixStore>(
        env_.agent_store ? fmt::format("saturate/attempt_{}", env_.restart_count) : "saturate", tcp);
  }

  /// Writes this rank's entry: proc/<rank> and the next join/<n>.
  void publish(const JoinRecord& me) {
    store_->set(fmt::format("settings/{}", me.rank), bytes(job_settings().text()));  // before the join: rank 0 reads it then
    store_->set(fmt::format("proc/{}", me.rank), bytes(record_text(me)));
    const int64_t n = store_->add("joined", 1);
    store_->set(fmt::format("join/{}", n), bytes(record_text(me)));
  }

  /// What rank `rank` runs (published before its join entry).
  static JobSettings settings_of(c10d::Store& store, int rank) {
    const std::string key = fmt::format("settings/{}", rank);
    if (!store.check({key})) return {};
    const auto v = store.get(key);
    return JobSettings::parse(std::string(v.begin(), v.end()));
  }

  void join_as_rank_zero(Clock::time_point deadline, const JoinRecord& me) {
    c10d::Store& store = *store_;
    const int size = env_.world_size;
    const std::string& size_var = env_.world_size_var;
    std::map<int, JoinRecord> joined;
    int64_t read = 0;
    std::string reason;
    bool usage = false;
    const bool everyone = call([&] {
      for (milliseconds pause(5);; pause = std::min(pause * 2, milliseconds(100))) {
        const int64_t count = store.add("joined", 0);
        while (read < count && reason.empty()) {
          const std::string key = fmt::format("join/{}", read + 1);
          if (!store.check({key})) break;  // that rank is between its add and its set
          const JoinRecord r = parse_record(store.get(key));
          ++read;
          if (r.world_size != size) {
            usage = true;
            reason = fmt::format("the ranks disagree on the world size: rank 0 (pid {} on {}) has {}={} and {} has "
                                 "{}={}; start every rank with the same {} (saturate launch and torchrun set it)",
                                 me.pid, me.host, size_var, size, r.who(), size_var, r.world_size, size_var);
          } else if (auto it = joined.find(r.rank); it != joined.end()) {
            usage = true;
            reason = fmt::format("two processes have RANK {}: pid {} on {} and pid {} on {}; give each rank its "
                                 "own RANK in 0..{} (saturate launch and torchrun set it)",
                                 r.rank, it->second.pid, it->second.host, r.pid, r.host, size - 1);
          } else if (const std::string differs = settings_of(store, r.rank).difference(job_settings(), "rank 0");
                     !differs.empty()) {
            usage = true;
            joined[r.rank] = r;  // it waits for the verdict: the grace below lets it read why
            reason = fmt::format("the ranks run different jobs: {} runs with {}; every rank of a job runs the same "
                                 "command with the same settings: give each rank the same flags (saturate launch "
                                 "and torchrun start one command on every rank)",
                                 r.who(), differs);
          } else {
            joined[r.rank] = r;
          }
        }
        if (!reason.empty()) break;
        if (static_cast<int>(joined.size()) == size) {
          store.set("status", bytes("ok"));
          return true;
        }
        stop_if_signalled();
        const milliseconds left = time_left(deadline);
        if (left.count() == 0) {
          std::string missing, present;
          for (int r = 0; r < size; ++r)
            if (!joined.count(r)) missing += (missing.empty() ? "rank " : ", ") + std::to_string(r);
          for (const auto& [r, rec] : joined) present += (present.empty() ? "" : ", ") + rec.who();
          reason = fmt::format("{} of {} ranks joined at {} within {} s (missing: {}; joined, all with {}={}: {}); "
                               "start the missing ranks with the same MASTER_ADDR, MASTER_PORT and {}, or raise "
                               "`dist_timeout`",
                               joined.size(), size, address(), seconds_text(timeout_), missing, size_var, size,
                               present, size_var);
          break;
        }
        std::this_thread::sleep_for(std::min(pause, left));
      }
      // tell the other ranks why, and give them a moment to read it before this process (and
      // the store it serves) goes
      store.set("status", bytes(std::string(usage ? "usage " : "failure ") + reason));
      const auto grace = Clock::now() + std::chrono::seconds(2);
      // the ranks that joined but this one (which is in `joined` only once its own entry was read:
      // counting it always left a rank that joined first unwaited for, and it lost the store)
      const auto waiting = static_cast<int64_t>(joined.size() - joined.count(0));
      while (store.add("status_read", 0) < waiting && Clock::now() < grace)
        std::this_thread::sleep_for(milliseconds(20));
      return false;
    });
    if (everyone) return;
    if (usage) throw UsageError(error(reason));
    throw RuntimeFailure(error(reason));
  }

  void join_as_other(Clock::time_point deadline, const JoinRecord& me) {
    c10d::Store& store = *store_;
    const std::string& size_var = env_.world_size_var;
    // rank 0's world size before this rank's entry: a rank that disagrees fails at once, naming
    // both, even when rank 0 saw the entry and exited first
    const int rank0_size = call([&] {
      if (!wait_for_key(store, "world_size", deadline))
        throw RuntimeFailure(error(fmt::format(
            "rank 0 did not join at {} within {} s (the store answers, rank 0 is not there); start rank 0 with the "
            "same MASTER_ADDR and MASTER_PORT, or raise `dist_timeout`",
            address(), seconds_text(timeout_))));
      const auto v = store.get("world_size");
      return std::stoi(std::string(v.begin(), v.end()));
    });
    if (rank0_size != env_.world_size) {
      try {
        publish(me);  // so that rank 0 names this rank too, if it is still there
      } catch (const std::exception&) {
      }
      throw UsageError(error(fmt::format(
          "the ranks disagree on the world size: this rank has {}={} and {} has {}={}; start every rank with the "
          "same {} (saturate launch and torchrun set it)",
          size_var, env_.world_size, where(), size_var, rank0_size, size_var)));
    }
    call([&] {
      publish(me);
      return 0;
    });
    // rank 0 decides when every rank has joined, or says why not at its own deadline (a moment later)
    const std::string status = call([&] {
      if (!wait_for_key(store, "status", deadline + std::chrono::seconds(1)))
        throw RuntimeFailure(error(fmt::format(
            "not every rank joined at {} within {} s (rank 0 is there; a rank did not start, or was given another "
            "MASTER_ADDR, MASTER_PORT or {}); start every rank, or raise `dist_timeout`",
            address(), seconds_text(timeout_), size_var)));
      const auto v = store.get("status");
      return std::string(v.begin(), v.end());
    });
    if (status == "ok") return;
    try {
      store.add("status_read", 1);  // rank 0 may go now
    } catch (const std::exception&) {
    }
    const std::string reason = "rank 0 reports: " + status.substr(status.find(' ') + 1);
    if (status.rfind("usage ", 0) == 0) throw UsageError(error(reason));
    throw RuntimeFailure(error(reason));
  }

  DistEnv env_;
  milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::vector<JoinRecord> peers_;
};

/// The backend the options ask for (auto: NCCL on a GPU, else Gloo); UsageError for one this
/// device or build cannot run, or a timeout that is not positive.
DistBackend checked_backend(const DistOptions& options, bool cuda) {
  DistBackend backend = options.backend;
  if (backend == DistBackend::kAuto) backend = cuda ? DistBackend::kNccl : DistBackend::kGloo;
  if (backend == DistBackend::kNccl && !cuda)
    throw UsageError("`backend` nccl: NCCL needs a CUDA device but the device is the CPU (expected gloo or auto "
                     "with `device` cpu); use `backend` gloo");
#ifndef SATURATE_HAVE_GLOO
  if (backend == DistBackend::kGloo)
    throw UsageError("`backend` gloo: this build has no Gloo (its headers were missing at build time: install "
                     "libgloo-dev, as scripts/setup.sh does, and rebuild)");
#endif
#ifndef SATURATE_WITH_NCCL
  if (backend == DistBackend::kNccl)
    throw UsageError("`backend` nccl: this build has no NCCL (LibTorch without CUDA, or nccl.h was not found at "
                     "build time); use `backend` gloo");
#endif
  if (options.timeout.count() <= 0)
    throw UsageError("dist_timeout", fmt::format("{} ms is not positive; give e.g. 300 (seconds)",
                                 options.timeout.count()));
  return backend;
}

const char* ifname_variable(DistBackend backend) {
  return backend == DistBackend::kGloo ? "GLOO_SOCKET_IFNAME" : "NCCL_SOCKET_IFNAME";
}

/// The interface this rank advertises (net_interface.h rank_interface), its failure naming the rank.
std::optional<NetInterface> advertised_interface(const DistEnv& env, DistBackend backend) {
  const char* variable = ifname_variable(backend);
  const char* ifname = std::getenv(variable);
  try {
    return rank_interface(env.master_addr, ifname ? ifname : "", variable, env.local_world_size >= env.world_size);
  } catch (const RuntimeFailure& e) {
    throw RuntimeFailure(fmt::format("rank {}/{}: {}", env.rank, env.world_size, e.what()));
  }
}

// the rendezvous says why it failed at its deadline, rank 0 up to 2 s later (its grace for the
// others to read why), the others 1 s later (rank 0's verdict); past this the store is stuck
constexpr milliseconds kRendezvousSlack{3000};

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
  throw UsageError("backend", fmt::format("unknown value '{}' (expected auto, nccl or gloo)", text));
}

DistGroup::DistGroup(DistEnv env, DistBackend backend, std::chrono::milliseconds timeout)
    : env_(std::move(env)), backend_(backend), timeout_(timeout) {}

DistGroup::~DistGroup() = default;

std::unique_ptr<DistGroup> DistGroup::connect(const DistEnv& env, const DistOptions& options, bool cuda,
                                              int device_index) {
  const DistBackend backend = checked_backend(options, cuda);
  std::unique_ptr<DistGroup> g(new DistGroup(env, backend, options.timeout));
  g->cuda_ = cuda;
  g->device_index_ = device_index;

  // the address this rank's peers will reach it by, checked before any connection: the interface
  // GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME) names, else the one that routes to MASTER_ADDR (issue
  // 45: the host name's 127.0.1.1 was advertised, and ranks on other hosts were refused); a
  // loopback one for a multi-host run is this rank's own setting, refused here at once
  const char* ifname = std::getenv(ifname_variable(backend));
  g->interface_ = advertised_interface(env, backend);

  // one deadline for the rendezvous: connecting to rank 0's store and every rank joining
  const auto deadline = Clock::now() + options.timeout;
  QuietC10Logs quiet;
  auto rendezvous = std::make_shared<Rendezvous>(env, options.timeout);
  run_within<int>(
      deadline + kRendezvousSlack,
      [rendezvous, deadline] {
        rendezvous->run(deadline);
        return 0;
      },
      [&] {
        return RuntimeFailure(rendezvous->error(fmt::format(
            "{} stopped answering: a store request got no reply within {} s (is rank 0 stopped, or another "
            "program listening on MASTER_PORT?)",
            rendezvous->where(), seconds_text(options.timeout))));
      });
  g->store_ = rendezvous->store();
  for (const JoinRecord& p : rendezvous->peers()) g->peers_.push_back({p.host, p.pid});

  auto pg_store = c10::make_intrusive<c10d::PrefixStore>("pg", g->store_);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(pg_store, env.rank, env.world_size);
  if (backend == DistBackend::kGloo) {
#ifdef SATURATE_HAVE_GLOO
    auto o = c10d::ProcessGroupGloo::Options::create(options.timeout);
    if (g->interface_)
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(g->interface_->name));
    else
      o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    c10::intrusive_ptr<c10d::Backend> b;
    const int rank = env.rank, size = env.world_size;
    try {
      // Gloo bounds its own connections by the timeout, not every store reply it waits for
      b = run_within<c10::intrusive_ptr<c10d::Backend>>(
          Clock::now() + options.timeout + kRendezvousSlack,
          [pg_store, o, rank, size] {
            return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, rank, size, o));
          },
          [&] {
            return RuntimeFailure(fmt::format("no answer within {} s", seconds_text(options.timeout)));
          });
    } catch (const std::exception& e) {
      throw g->failure("connecting the Gloo process group", error_text(e));
    }
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, b);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#endif
  } else {
#ifdef SATURATE_WITH_NCCL
    // NCCL's bootstrap socket: the interface found above unless one is named
    if (g->interface_ && !ifname) ::setenv("NCCL_SOCKET_IFNAME", g->interface_->name.c_str(), 0);
    c10::intrusive_ptr<c10d::Backend> b;
    try {
      b = make_nccl_backend(pg_store, env.rank, env.world_size, options.timeout, device_index);
    } catch (const std::exception& e) {
      throw g->failure("creating the NCCL process group", error_text(e));
    }
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
  return RuntimeFailure(fmt::format("rank {}/{}: {} failed: {} ({}; `dist_timeout` {} s)", rank(), world_size(), what,
                                    describe_missing_ranks(), first, timeout_.count() / 1000.0));
}

}  // namespace saturate

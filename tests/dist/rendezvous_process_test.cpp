// The rendezvous with real `saturate train` processes started as ranks by hand (as mpirun or srun
// would): a rank whose rank 0 is unreachable, a rank 0 whose other rank never comes, and ranks
// that disagree on WORLD_SIZE all fail within --dist-timeout (or at once) in one line that names
// the rank, the address and the cause, with no C++ backtrace.
// Run by ctest's `dist` label (SATURATE_DIST_TESTS=1); the DistEnvTest ones run everywhere.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <map>

#include "saturate/dist/env.h"
#include "saturate/dist/launch.h"
#include "support/support.h"

namespace saturate {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

#define SKIP_OUTSIDE_DIST_LABEL()                                                            \
  do {                                                                                       \
    if (!std::getenv("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist"; \
  } while (0)

const std::string kRendezvousBin = SATURATE_BINARY;
const std::string kRendezvousTrain = " train --model mlp --layers 1 --width 16 --device cpu --threads 1 --workers 0 --steps 1 -q ";

/// What the user sees: every line of `text` that is not empty.
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// One line, no C++ backtrace (c10's "Exception raised from ... frame #0").
void expect_one_line_without_backtrace(const std::string& out) {
  EXPECT_EQ(lines(out).size(), 1u) << out;
  EXPECT_EQ(out.find("Exception raised from"), std::string::npos) << out;
  EXPECT_EQ(out.find("frame #"), std::string::npos) << out;
  EXPECT_EQ(out.find("[c10d]"), std::string::npos) << out;
}

std::string rank_env(int rank, int world_size, int port) {
  return "RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world_size) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DistEnvTest, EachLauncherNamesTheVariableThatGaveTheWorldSize) {
  // named when the ranks disagree on the world size at the rendezvous
  EXPECT_EQ(read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).world_size_var, "WORLD_SIZE");
  EXPECT_EQ(read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}})).world_size_var,
            "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(read_dist_env(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}})).world_size_var, "PMI_SIZE");
  EXPECT_EQ(read_dist_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).world_size_var, "SLURM_NTASKS");
}

TEST(DistEnvTest, TorchrunsRestartCountIsReadForTheAgentStoresPrefix) {
  auto vars = std::map<std::string, std::string>{{"RANK", "0"},
                                                 {"WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", "1234"},
                                                 {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
  EXPECT_EQ(read_dist_env(env_of(vars)).restart_count, 0);
  vars["TORCHELASTIC_RESTART_COUNT"] = "2";
  EXPECT_EQ(read_dist_env(env_of(vars)).restart_count, 2);
}

TEST(DistProcessTest, ARankWhoseRankZeroIsUnreachableFailsWithinTheTimeoutInOneLine) {
  SKIP_OUTSIDE_DIST_LABEL();
  // a free port: nothing listens there, as when MASTER_ADDR/MASTER_PORT point nowhere
  const int port = free_port("127.0.0.1");
  std::string out;
  const auto start = Clock::now();
  const int status = testing::run_command(
      rank_env(1, 2, port) + "timeout 120 " + kRendezvousBin + kRendezvousTrain + "--dist-timeout 3", &out);
  const double elapsed = seconds_since(start);
  EXPECT_EQ(status, 1) << out;  // a RuntimeFailure, not the timeout's 124
  EXPECT_NE(out.find("saturate: error: rank 1/2: rendezvous failed: cannot reach rank 0 at 127.0.0.1:" +
                     std::to_string(port) + " within 3 s (connection refused"),
            std::string::npos)
      << out;
  expect_one_line_without_backtrace(out);
  // it kept trying for the whole timeout (rank 0 may start later), and not much longer: the
  // bound leaves room for starting the process on a busy machine (c10d alone took 2x and more)
  EXPECT_GE(elapsed, 3.0) << out;
  EXPECT_LT(elapsed, 3.0 + 12.0) << out;
}

TEST(DistProcessTest, ARankWhoseRankZeroStopsAnsweringFailsWithinTheTimeoutInOneLine) {
  SKIP_OUTSIDE_DIST_LABEL();
  // a socket that listens and never answers: the kernel accepts the connection, as it does for
  // a rank 0 that is stopped (SIGSTOP, a debugger) or another program on MASTER_PORT; c10d's
  // TCPStore waited for its reply forever
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  std::string out;
  const auto start = Clock::now();
  const int status = testing::run_command(
      rank_env(1, 2, port) + "timeout 120 " + kRendezvousBin + kRendezvousTrain + "--dist-timeout 3", &out);
  const double elapsed = seconds_since(start);
  close(fd);
  EXPECT_EQ(status, 1) << out;  // not the timeout's 124
  EXPECT_NE(out.find("saturate: error: rank 1/2: rendezvous failed: rank 0 at 127.0.0.1:" + std::to_string(port) +
                     " stopped answering: a store request got no reply within 3 s"),
            std::string::npos)
      << out;
  expect_one_line_without_backtrace(out);
  // the timeout and the rendezvous's 3 s of slack, and room for starting the process
  EXPECT_LT(elapsed, 3.0 + 3.0 + 12.0) << out;
}

TEST(DistProcessTest, ARankZeroWhoseOtherRankNeverJoinsFailsWithinTheTimeoutNamingIt) {
  SKIP_OUTSIDE_DIST_LABEL();
  const int port = free_port("127.0.0.1");
  std::string out;
  const auto start = Clock::now();
  const int status = testing::run_command(
      rank_env(0, 3, port) + "timeout 120 " + kRendezvousBin + kRendezvousTrain + "--dist-timeout 3", &out);
  const double elapsed = seconds_since(start);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("saturate: error: rank 0/3: rendezvous failed: 1 of 3 ranks joined at 127.0.0.1:" +
                     std::to_string(port) + " within 3 s (missing: rank 1, 2; joined, all with WORLD_SIZE=3: rank 0 (pid"),
            std::string::npos)
      << out;
  expect_one_line_without_backtrace(out);
  EXPECT_GE(elapsed, 3.0) << out;
  EXPECT_LT(elapsed, 3.0 + 12.0) << out;
}

/// A rank in the background: its output in dir/log_<name>, its exit status in dir/status_<name>.
void start_rank(const std::string& dir, const std::string& name, const std::string& command) {
  ASSERT_EQ(std::system(("(" + command + " > " + dir + "/log_" + name + " 2>&1; echo $? > " + dir + "/status_" + name +
                         ") &")
                            .c_str()),
            0);
}

/// The rank's exit status, or -1 if it has not ended by `deadline`.
int wait_rank(const std::string& dir, const std::string& name, Clock::time_point deadline) {
  const std::string path = dir + "/status_" + name;
  while (Clock::now() < deadline) {
    int status = -1;
    if (fs::exists(path) && (std::ifstream(path) >> status)) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(DistProcessTest, RanksStartedWithDifferentWorldSizesFailAtOnceNamingBothSizes) {
  SKIP_OUTSIDE_DIST_LABEL();
  // rank 0 expecting fewer ranks than rank 1 does, then more; a timeout far longer than the
  // bound, so that a rank that waited for it fails the test
  for (const auto& [size0, size1] : {std::pair{2, 3}, std::pair{3, 2}}) {
    SCOPED_TRACE("rank 0 WORLD_SIZE=" + std::to_string(size0) + ", rank 1 WORLD_SIZE=" + std::to_string(size1));
    const std::string dir = testing::temp_dir("dist_world_size_" + std::to_string(size0) + std::to_string(size1));
    const int port = free_port("127.0.0.1");
    const std::string flags = kRendezvousTrain + "--dist-timeout 100";
    const auto start = Clock::now();
    start_rank(dir, "0", rank_env(0, size0, port) + "timeout 110 " + kRendezvousBin + flags);
    start_rank(dir, "1", rank_env(1, size1, port) + "timeout 110 " + kRendezvousBin + flags);
    const auto deadline = start + std::chrono::seconds(105);
    const int status1 = wait_rank(dir, "1", deadline);
    const double elapsed1 = seconds_since(start);
    const int status0 = wait_rank(dir, "0", deadline);
    const double elapsed0 = seconds_since(start);
    const std::string log0 = read_text(dir + "/log_0"), log1 = read_text(dir + "/log_1");
    // a usage error (the ranks were started inconsistently), named on both sides
    EXPECT_EQ(status1, 2) << log1;
    EXPECT_EQ(status0, 2) << log0;
    EXPECT_NE(log1.find("saturate: error: rank 1/" + std::to_string(size1) +
                        ": rendezvous failed: the ranks disagree on the world size: this rank has WORLD_SIZE=" +
                        std::to_string(size1) + " and rank 0 at 127.0.0.1:" + std::to_string(port) +
                        " has WORLD_SIZE=" + std::to_string(size0)),
              std::string::npos)
        << log1;
    EXPECT_NE(log0.find("saturate: error: rank 0/" + std::to_string(size0) +
                        ": rendezvous failed: the ranks disagree on the world size: rank 0 (pid "),
              std::string::npos)
        << log0;
    EXPECT_NE(log0.find("has WORLD_SIZE=" + std::to_string(size0) + " and rank 1 (pid "), std::string::npos) << log0;
    EXPECT_NE(log0.find("has WORLD_SIZE=" + std::to_string(size1) + "; start every rank with the same WORLD_SIZE"),
              std::string::npos)
        << log0;
    expect_one_line_without_backtrace(log0);
    expect_one_line_without_backtrace(log1);
    // at once: the start of two processes on a busy machine, nowhere near the 100 s timeout
    EXPECT_LT(elapsed1, 40.0) << log1;
    EXPECT_LT(elapsed0, 40.0) << log0;
  }
}

}  // namespace
}  // namespace saturate

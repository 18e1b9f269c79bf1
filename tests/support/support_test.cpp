// Helpers of support.h (in a *_test.cpp so the glob picks them up) and their own checks.
#include "support/support.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace saturate::testing {

std::string temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string base = std::filesystem::temp_directory_path() / "saturate_tests";
  std::string dir = base + "/" + name + "_" + (info ? info->name() : "x") + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);  // throws on invalid JSON
}

namespace {
std::map<std::string, FreshChild>& fresh_children() {
  static std::map<std::string, FreshChild> children;
  return children;
}
}  // namespace

bool register_fresh_child(const std::string& name, FreshChild child) {
  fresh_children()[name] = child;
  return true;
}

FreshChild find_fresh_child(const std::string& name) {
  const auto it = fresh_children().find(name);
  return it == fresh_children().end() ? nullptr : it->second;
}

std::string run_fresh_child(const std::string& name, const std::vector<std::string>& args) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string command = "'" + self + "' --fresh-child " + name;
  for (const std::string& a : args) command += " '" + a + "'";
  std::string out;
  const int code = run_command(command, &out);
  if (code != 0) throw std::runtime_error("fresh child " + name + " exited " + std::to_string(code) + ": " + out);
  const size_t at = out.rfind(kFreshChildAnswer);
  if (at == std::string::npos) throw std::runtime_error("fresh child " + name + " printed no answer: " + out);
  const size_t begin = at + std::string(kFreshChildAnswer).size();
  return out.substr(begin, out.find('\n', begin) - begin);
}

int run_command(const std::string& command, std::string* output) {
  std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf{};
  std::string out;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int spawn_saturate(const std::vector<std::string>& args, const std::string& stderr_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(SATURATE_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    (void)!freopen("/dev/null", "w", stdout);
    (void)!freopen(stderr_path.empty() ? "/dev/null" : stderr_path.c_str(), "w", stderr);
    execv(SATURATE_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t last_progress_step(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  static const std::regex line(R"(step\s+(\d+)/)");
  int64_t last = 0;
  const std::string s = text.str();
  for (auto it = std::sregex_iterator(s.begin(), s.end(), line); it != std::sregex_iterator(); ++it)
    last = std::stoll((*it)[1]);
  return last;
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
  struct rlimit limit {};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  saved_cur_ = limit.rlim_cur;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &saved_action_);
  limit.rlim_cur = bytes;
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ADD_FAILURE() << "setrlimit(RLIMIT_FSIZE) failed";
}

FileSizeLimit::~FileSizeLimit() {
  struct rlimit limit {};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = saved_cur_;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  ::sigaction(SIGXFSZ, &saved_action_, nullptr);
}

}  // namespace saturate::testing

TEST(SupportTest, RunCommandReportsExitStatusAndOutput) {
  std::string out;
  EXPECT_EQ(saturate::testing::run_command("echo hi; exit 3", &out), 3);
  EXPECT_EQ(out, "hi\n");
}

// Helpers of support.h (in a *_test.cpp so the glob picks them up) and their own checks.
#include "support/support.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace saturate::testing {

std::string temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string base = std::filesystem::temp_directory_path() / "saturate_tests";
  std::string dir = base + "/" + name + "_" + (info ? info->name() : "x") + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
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

}  // namespace saturate::testing

TEST(SupportTest, RunCommandReportsExitStatusAndOutput) {
  std::string out;
  EXPECT_EQ(saturate::testing::run_command("echo hi; exit 3", &out), 3);
  EXPECT_EQ(out, "hi\n");
}

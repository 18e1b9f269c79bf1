// Shared test helpers.
#pragma once
#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json_fwd.hpp>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "test_paths.h"

/// Asserts that `stmt` throws `type` whose what() contains `substr`.
#define ASSERT_THROWS_WITH(stmt, type, substr)                                          \
  do {                                                                                  \
    try {                                                                               \
      stmt;                                                                             \
      FAIL() << "expected " #type " from " #stmt;                                       \
    } catch (const type& e) {                                                           \
      EXPECT_NE(std::string(e.what()).find(substr), std::string::npos)                  \
          << "message was: " << e.what();                                               \
    }                                                                                   \
  } while (0)

/// A UsageError about library option `opt` (its name, not a flag: the command line adds the flag)
/// whose message contains `substr`.
#define ASSERT_USAGE_ERROR_ABOUT(stmt, opt, substr)                                    \
  do {                                                                                  \
    try {                                                                               \
      stmt;                                                                             \
      FAIL() << "expected a UsageError about " << (opt) << " from " #stmt;              \
    } catch (const saturate::UsageError& e) {                                           \
      EXPECT_EQ(e.option(), std::string(opt)) << "message was: " << e.what();           \
      EXPECT_NE(std::string(e.what()).find(substr), std::string::npos)                  \
          << "message was: " << e.what();                                               \
    }                                                                                   \
  } while (0)

/// CUDA tests are named *_CUDA and skip themselves without a GPU.
#define SKIP_WITHOUT_CUDA()                                             \
  do {                                                                  \
    if (!saturate::cuda_available()) GTEST_SKIP() << "no CUDA device";  \
  } while (0)

/// Registers a fresh child (run_fresh_child) at namespace scope: SATURATE_FRESH_CHILD(name, function).
#define SATURATE_FRESH_CHILD(name, function) \
  static const bool saturate_fresh_child_##function = saturate::testing::register_fresh_child(name, function)

namespace saturate::testing {
inline constexpr int64_t kMiB = int64_t{1} << 20;
/// A fresh temporary directory for one test.
std::string temp_dir(const std::string& name);
/// Runs a shell command, returns its exit status; stdout+stderr into `output`.
int run_command(const std::string& command, std::string* output);
/// Starts the saturate binary with `args` in the background, stdout to /dev/null and stderr to
/// `stderr_path` ("" : /dev/null); returns its pid.
int spawn_saturate(const std::vector<std::string>& args, const std::string& stderr_path = "");
/// The JSON document in the file at `path` (throws on a missing file or invalid JSON).
nlohmann::json read_json(const std::string& path);
/// Waits for a child; its exit code, or 128 + the signal that ended it.
int wait_exit(int pid);

/// A check that must run in a process of its own (a trial after a search, in a process that never
/// searched): registered by name, run by this test binary re-started as
/// `saturate_tests --fresh-child NAME ARG...` (tests/support/main.cpp), its answer on stdout.
using FreshChild = std::string (*)(const std::vector<std::string>& args);
/// Registers `child` under `name` (at static initialization: SATURATE_FRESH_CHILD); returns true.
bool register_fresh_child(const std::string& name, FreshChild child);
/// The child registered as `name`, or nullptr.
FreshChild find_fresh_child(const std::string& name);
/// The child prints its answer on one line after this (its other output, LibTorch's included, aside).
inline constexpr const char* kFreshChildAnswer = "fresh child answer: ";
/// Runs child `name` with `args` in a new process of this binary and returns its answer (the line
/// after kFreshChildAnswer); throws std::runtime_error with its output when it exits other than 0
/// or prints no answer.
std::string run_fresh_child(const std::string& name, const std::vector<std::string>& args);
/// The N of the last "step N/M" progress line in a file (0: none yet).
int64_t last_progress_step(const std::string& path);
/// While it lives, this process may write files of at most `bytes` (`ulimit -f`) and SIGXFSZ is
/// ignored, so that a write past the limit fails with EFBIG; both are restored at its end.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  uint64_t saved_cur_ = 0;
  struct sigaction saved_action_ {};
};
}  // namespace saturate::testing

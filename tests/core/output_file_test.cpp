#include "saturate/core/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;
namespace fs = std::filesystem;

namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

/// Reads a FIFO to its end on another thread. If the writer never opens the FIFO (it replaced it
/// instead), the reader is unblocked by a dummy writer after `wait`, so the test fails, not hangs.
class FifoReader {
 public:
  explicit FifoReader(std::string path) : path_(std::move(path)) {
    result_ = std::async(std::launch::async, [p = path_] {
      const int fd = ::open(p.c_str(), O_RDONLY);
      if (fd < 0) return std::string("<cannot open>");
      std::string got;
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
      ::close(fd);
      return got;
    });
  }
  std::string get(std::chrono::seconds wait = std::chrono::seconds(10)) {
    if (result_.wait_for(wait) != std::future_status::ready) {
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);  // the reader's open returns; it reads EOF
      if (fd >= 0) ::close(fd);
      return "<nothing: the FIFO was never opened for writing> " + result_.get();
    }
    return result_.get();
  }

 private:
  std::string path_;
  std::future<std::string> result_;
};

}  // namespace

TEST(OutputFileTest, ARegularFileIsReplacedAtomicallyKeepingItsPermissions) {
  const std::string dir = saturate::testing::temp_dir("output_file_regular");
  const std::string path = dir + "/result.json";
  put(path, "old content, longer than the new one");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  const ino_t before = lstat_of(path).st_ino;
  write_output_file(path, "new", {"--json"});
  EXPECT_EQ(read_file(path), "new");
  const struct stat after = lstat_of(path);
  EXPECT_NE(after.st_ino, before) << "written in place, not renamed over";
  EXPECT_EQ(after.st_mode & 07777, 0640u);
  EXPECT_EQ(names_in(dir), std::set<std::string>{"result.json"});
}

TEST(OutputFileTest, AMissingFileIsCreatedWithNothingElseLeft) {
  const std::string dir = saturate::testing::temp_dir("output_file_missing");
  write_output_file(dir + "/out.json", std::vector<std::string_view>{"a", "b", "c"});
  EXPECT_EQ(read_file(dir + "/out.json"), "abc");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"out.json"});
}

// the check before the work says bad input (UsageError, exit 2); a write after it, a failure (exit 1)
TEST(OutputFileTest, AMissingFolderIsRefusedNamingItAndNothingIsCreated) {
  const std::string dir = saturate::testing::temp_dir("output_file_no_folder");
  ASSERT_THROWS_WITH(write_output_file(dir + "/nope/out.json", "x", {"--json"}), RuntimeFailure,
                     "--json " + dir + "/nope/out.json: cannot open it for writing: the folder " + dir +
                         "/nope does not exist");
  ASSERT_THROWS_WITH(check_output_path(dir + "/nope/out.json", {"--json"}), UsageError, "does not exist");
  EXPECT_TRUE(names_in(dir).empty());
}

TEST(OutputFileTest, ASymlinkStaysASymlinkAndItsTargetGetsTheContent) {
  const std::string dir = saturate::testing::temp_dir("output_file_symlink");
  fs::create_directories(dir + "/real");
  put(dir + "/real/target.json", "old");
  fs::create_symlink("real/target.json", dir + "/link.json");
  write_output_file(dir + "/link.json", "new", {"--json"});
  EXPECT_TRUE(S_ISLNK(lstat_of(dir + "/link.json").st_mode));
  EXPECT_EQ(fs::read_symlink(dir + "/link.json"), fs::path("real/target.json"));
  EXPECT_EQ(read_file(dir + "/real/target.json"), "new");
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"link.json", "real"}));
  EXPECT_EQ(names_in(dir + "/real"), std::set<std::string>{"target.json"});
}

TEST(OutputFileTest, ADanglingSymlinkCreatesItsTargetAndStaysASymlink) {
  const std::string dir = saturate::testing::temp_dir("output_file_dangling");
  fs::create_symlink("made.json", dir + "/link.json");
  write_output_file(dir + "/link.json", "made");
  EXPECT_TRUE(S_ISLNK(lstat_of(dir + "/link.json").st_mode));
  EXPECT_EQ(read_file(dir + "/made.json"), "made");
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"link.json", "made.json"}));
}

TEST(OutputFileTest, AFifoReceivesTheContentAndStaysAFifo) {
  const std::string dir = saturate::testing::temp_dir("output_file_fifo");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoReader reader(fifo);
  std::string content(200000, 'x');  // more than a pipe holds: the writer must stream into the reader
  content += "end";
  write_output_file(fifo, content, {"--json"});
  EXPECT_EQ(reader.get(), content);
  EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
  EXPECT_EQ(names_in(dir), std::set<std::string>{"pipe"});
}

TEST(OutputFileTest, AFolderIsRefusedNamingAFilePathAndNothingIsLeftBehind) {
  const std::string dir = saturate::testing::temp_dir("output_file_folder");
  fs::create_directories(dir + "/results");
  ASSERT_THROWS_WITH(write_output_file(dir + "/results", "x", {"--json", "result.json"}), RuntimeFailure,
                     "--json " + dir + "/results: is a folder, not a file; give a file path such as " + dir +
                         "/results/result.json");
  ASSERT_THROWS_WITH(check_output_path(dir + "/results", {"--json"}), UsageError, "is a folder");
  ASSERT_THROWS_WITH(write_output_file_by_path(dir + "/results", [](const std::string&) {}, {"--save"}), RuntimeFailure,
                     "is a folder");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"results"});
  EXPECT_TRUE(names_in(dir + "/results").empty());
}

TEST(OutputFileTest, DevFullGivesAClearNoSpaceErrorAndStaysACharacterDevice) {
  struct stat st {};
  if (::stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) GTEST_SKIP() << "no /dev/full";
  const std::set<std::string> dev_before = names_in("/dev");
  ASSERT_THROWS_WITH(write_output_file("/dev/full", "{}\n", {"--json"}), RuntimeFailure,
                     "--json /dev/full: writing failed: no space left on the device (ENOSPC)");
  ASSERT_THROWS_WITH(write_output_file_by_path("/dev/full", [](const std::string& f) { put(f, "model"); }, {"--save"}),
                     RuntimeFailure, "--save /dev/full: writing failed: no space left on the device");
  EXPECT_TRUE(S_ISCHR(lstat_of("/dev/full").st_mode));
  EXPECT_EQ(lstat_of("/dev/full").st_rdev, st.st_rdev);
  EXPECT_EQ(names_in("/dev"), dev_before);
  EXPECT_NO_THROW(check_output_path("/dev/full", {"--json"}));  // writable: the check opens nothing
}

TEST(OutputFileTest, AnOpenDescriptorPathIsWrittenThroughTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  write_output_file("/dev/fd/" + std::to_string(fds[1]), "through the pipe");
  ::close(fds[1]);
  char buf[64] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe");
}

TEST(OutputFileTest, TheFileSizeLimitGivesAClearErrorAndKeepsThePreviousFile) {
  const std::string dir = saturate::testing::temp_dir("output_file_fsize");
  const std::string path = dir + "/big.json";
  put(path, "previous");
  std::string message, by_path_message;
  {
    const saturate::testing::FileSizeLimit limit(4096);
  try {
    write_output_file(path, std::string(10000, 'x'), {"--json"});
  } catch (const RuntimeFailure& e) {
    message = e.what();
  }
  try {
    write_output_file_by_path(path, [](const std::string& f) {
      std::ofstream out(f, std::ios::binary);
      out << std::string(10000, 'y') << std::flush;
      if (!out) throw std::runtime_error("file write failed");
    }, {"--save"});
  } catch (const RuntimeFailure& e) {
    by_path_message = e.what();
  }
  }  // the limit and SIGXFSZ are back
  EXPECT_NE(message.find("--json " + path + ": writing failed: the file size limit (ulimit -f) was reached"),
            std::string::npos) << message;
  EXPECT_NE(by_path_message.find("--save " + path + ": writing failed: the file size limit (ulimit -f) was reached"),
            std::string::npos) << by_path_message;
  EXPECT_EQ(read_file(path), "previous");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"big.json"});
}

TEST(OutputFileTest, AWriterByPathFillsARegularFileAndAFifoAndLeavesNoTemporary) {
  const std::string dir = saturate::testing::temp_dir("output_file_by_path");
  const auto save = [](const std::string& file) { put(file, "model bytes"); };
  write_output_file_by_path(dir + "/model.pt", save, {"--save"});
  EXPECT_EQ(read_file(dir + "/model.pt"), "model bytes");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoReader reader(fifo);
  write_output_file_by_path(fifo, save, {"--save"});
  EXPECT_EQ(reader.get(), "model bytes");
  EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"model.pt", "pipe"}));
}

TEST(OutputFileTest, AFailingWriterByPathNamesThePathAndKeepsThePreviousFile) {
  const std::string dir = saturate::testing::temp_dir("output_file_by_path_fails");
  put(dir + "/model.pt", "previous");
  ASSERT_THROWS_WITH(write_output_file_by_path(dir + "/model.pt",
                                               [](const std::string& file) {
                                                 put(file, "half");
                                                 throw std::runtime_error("serializer broke");
                                               },
                                               {"--save"}),
                     RuntimeFailure, "--save " + dir + "/model.pt: writing failed: serializer broke");
  EXPECT_EQ(read_file(dir + "/model.pt"), "previous");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"model.pt"});
}

TEST(OutputFileTest, TheCheckCreatesNothingAndLeavesAFifoUnopened) {
  const std::string dir = saturate::testing::temp_dir("output_file_check");
  check_output_path(dir + "/new.json", {"--trace"});
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  check_output_path(fifo, {"--trace"});  // would block here if it opened the FIFO: no reader
  EXPECT_EQ(names_in(dir), std::set<std::string>{"pipe"});
}

TEST(InternalErrorTest, AsksForABugReportAndIsNoRuntimeFailure) {
  try {
    throw InternalError("plan: the two recorded batches must differ");
  } catch (const RuntimeFailure&) {
    FAIL() << "an internal error must not pass for an expected failure";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: the two recorded batches must differ; this is a bug in saturate, please report it at "
              "https://github.com/saturate/saturate/issues with the command line");
  }
}

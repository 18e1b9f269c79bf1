#include "train/checkpoint_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"
#include "saturate/core/terminal_text.h"
#include "saturate/core/units.h"

namespace saturate {
namespace {

constexpr char kMagic[8] = {'S', 'A', 'T', 'C', 'K', 'P', 'T', '1'};

/// Removes DIR/checkpoint.pt.PID.N.tmp left by a run killed mid-write (its PID no longer runs):
/// the temporaries have unique names, so they would pile up instead of being overwritten.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint.pt.";
    if (name.size() <= prefix.size() + 4 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - 4, 4, ".tmp") != 0)
      continue;
    const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - 4);  // PID.N
    const size_t dot = middle.find('.');
    if (dot == 0 || dot == std::string::npos || middle.find_first_not_of("0123456789.") != std::string::npos) continue;
    const long pid = std::strtol(middle.substr(0, dot).c_str(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

uint64_t fnv1a64(const std::string& data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string checkpoint_path(const std::string& dir) { return dir + "/" + checkpoint_file_name(); }
const char* checkpoint_file_name() { return "checkpoint.pt"; }
const char* checkpoint_lock_file_name() { return ".saturate.lock"; }

void check_checkpoint_dir(const std::string& dir, const std::string& option) {
  if (dir.empty())
    throw UsageError(option, "an empty path (an unset shell variable?); give a folder, or leave the option out");
  struct stat st {};
  std::filesystem::path p(dir);
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw UsageError(option, fmt::format("{} is not a folder; give a folder for the checkpoints (it is created "
                                           "when missing)",
                                           dir));
  } else {
    // the nearest existing parent must let the folder be created
    for (p = std::filesystem::absolute(p).parent_path(); !p.empty() && ::stat(p.c_str(), &st) != 0; p = p.parent_path())
      if (p == p.parent_path()) break;
    if (!S_ISDIR(st.st_mode))
      throw UsageError(option, fmt::format("{} cannot be created: {} is not a folder", dir, p.string()));
  }
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw UsageError(option, fmt::format("{}: {} cannot be written ({}); give a folder this user can write",
                                         dir, p.string(), std::strerror(errno)));
}

namespace {

/// The lock files this process holds, by folder as given: write_checkpoint_file checks that the
/// folder still holds the very file (device and inode) before it writes there.
struct HeldLock {
  std::string dir;
  dev_t device = 0;
  ino_t inode = 0;
};
std::vector<HeldLock>& held_locks() {
  static std::vector<HeldLock> locks;
  return locks;
}

/// RuntimeFailure when `dir`'s lock file is no longer the one this process locked (the folder
/// was removed, moved or replaced while the run held it); nothing when no lock on `dir` is held.
void check_lock_still_there(const std::string& dir) {
  for (const HeldLock& h : held_locks()) {
    if (h.dir != dir) continue;
    const std::string path = dir + "/" + checkpoint_lock_file_name();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || st.st_dev != h.device || st.st_ino != h.inode)
      throw RuntimeFailure(fmt::format(
          "`checkpoint_dir` {}: the folder was removed, moved or replaced while this run held it (its lock {} is {}); "
          "the checkpoint is not written there, where another run may now write: restore the folder, or resume from "
          "the last checkpoint with another `checkpoint_dir`",
          dir, path, ::lstat(path.c_str(), &st) != 0 ? "gone" : "another file"));
    return;
  }
}

}  // namespace

CheckpointLock::CheckpointLock(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RuntimeFailure(fmt::format("`checkpoint_dir` {}: cannot create it: {}", dir, ec.message()));
  const std::string path = dir + "/" + checkpoint_lock_file_name();
  // never through a link: a symlink (or a hard link) planted in a shared folder would make this
  // run write its name into whatever file the link names. O_NONBLOCK: a FIFO does not hang the open.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd_ < 0) {
    const int error = errno;
    struct stat lst {};
    if (error == ELOOP || (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)))
      throw UsageError("checkpoint_dir",
                       fmt::format("{}: its lock {} is a symbolic link; saturate never follows a link there (it would "
                                   "write into the file the link names). Remove the link (rm {}), or give this run "
                                   "another folder",
                                   dir, path, path));
    throw RuntimeFailure(fmt::format("`checkpoint_dir` {}: cannot open its lock {}: {}", dir, path, std::strerror(error)));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    const bool linked = S_ISREG(st.st_mode) && st.st_nlink != 1;
    ::close(fd_);
    fd_ = -1;
    throw UsageError("checkpoint_dir",
                     fmt::format("{}: its lock {} is {}; saturate writes its lock only into a plain file of its own. "
                                 "Remove it (rm {}), or give this run another folder",
                                 dir, path,
                                 linked ? fmt::format("a hard link ({} names for one file: writing it would change "
                                                      "another file)",
                                                      st.st_nlink)
                                        : "not a regular file (a FIFO, a device or a folder)",
                                 path));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char owner[256] = {};
    const ssize_t n = ::pread(fd_, owner, sizeof owner - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who = n > 0 ? std::string(owner, static_cast<size_t>(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    who = terminal_text(who);  // the file is anyone's: no escapes reach the terminal
    if (error != EWOULDBLOCK)
      throw RuntimeFailure(fmt::format("`checkpoint_dir` {}: cannot lock {}: {}", dir, path, std::strerror(error)));
    throw UsageError("checkpoint_dir", fmt::format("{} is in use by another run ({}): two runs writing one folder "
                                                   "would leave only the last one's state; wait for it to end, or give "
                                                   "this run another folder",
                                                   dir, who));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("pid {} on {}\n", ::getpid(), host);
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    // the owner's name is only for the message of a second run: the lock holds without it
  }
  dir_ = dir;
  held_locks().push_back({dir, st.st_dev, st.st_ino});
}

void CheckpointLock::release() {
  if (fd_ < 0) return;
  ::close(fd_);  // closing the last descriptor releases the flock
  fd_ = -1;
  auto& locks = held_locks();
  for (auto it = locks.begin(); it != locks.end(); ++it)
    if (it->dir == dir_) {
      locks.erase(it);
      break;
    }
}

CheckpointLock& CheckpointLock::operator=(CheckpointLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    dir_ = std::move(other.dir_);
    other.fd_ = -1;
  }
  return *this;
}

CheckpointLock::~CheckpointLock() { release(); }

void write_checkpoint_file(const std::string& dir, const std::string& payload) {
  check_lock_still_there(dir);  // before the folder is created again
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RuntimeFailure(fmt::format("`checkpoint_dir` {}: cannot create it: {}", dir, ec.message()));
  const uint64_t length = payload.size();
  const uint64_t sum = fnv1a64(payload);
  // a temporary next to it, fsynced, renamed over it, the folder fsynced: a crash leaves the previous one
  OutputFileOptions o;
  o.label = "checkpoint";
  o.suggested_name = "checkpoint.pt";
  o.sync_directory = true;
  write_output_file(checkpoint_path(dir),
                    {std::string_view(kMagic, sizeof kMagic),
                     std::string_view(reinterpret_cast<const char*>(&length), sizeof length),
                     std::string_view(reinterpret_cast<const char*>(&sum), sizeof sum), payload},
                    o);
  remove_stale_temporaries(dir);
}

std::string read_checkpoint_file(const std::string& dir, int64_t max_bytes) {
  const std::string path = checkpoint_path(dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UsageError(fmt::format("`resume` {}: no checkpoint there ({} is missing); give the folder a run wrote "
                                 "with `checkpoint_dir`",
                                 dir, path));
  // read no more than the file holds, and no file larger than the model's state can be
  if (!S_ISREG(st.st_mode))
    throw UsageError(fmt::format("`resume` {}: {} is not a regular file (a device, a FIFO or a folder); give the "
                                 "folder a run wrote with `checkpoint_dir`",
                                 dir, path));
  if (st.st_size > max_bytes)
    throw UsageError(fmt::format("`resume` {}: {} holds {}, more than this model's state can take ({}); it was not "
                                 "written for this model: give its folder, or start a new `checkpoint_dir`",
                                 dir, path, format_bytes(st.st_size), format_bytes(max_bytes)));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("`resume` {}: cannot read {}: {}", dir, path, std::strerror(errno)));
  std::string data(static_cast<size_t>(st.st_size), '\0');
  in.read(data.data(), st.st_size);
  data.resize(static_cast<size_t>(in.gcount()));
  const size_t header = sizeof kMagic + 2 * sizeof(uint64_t);
  // the magic is "SATCKPT" and a format version digit
  const size_t family = sizeof kMagic - 1;
  if (data.size() >= sizeof kMagic && std::memcmp(data.data(), kMagic, family) == 0 && data[family] != kMagic[family])
    throw UsageError(fmt::format("`resume` {}: {} is a saturate checkpoint of format version {} (this build reads {}): "
                                 "resume it with the saturate that wrote it",
                                 dir, path, data[family], kMagic[family]));
  if (data.size() < header || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    throw UsageError(fmt::format("`resume` {}: {} is not a saturate checkpoint (bad header)", dir, path));
  uint64_t length = 0, sum = 0;
  std::memcpy(&length, data.data() + sizeof kMagic, sizeof length);
  std::memcpy(&sum, data.data() + sizeof kMagic + sizeof length, sizeof sum);
  if (data.size() - header < length)
    throw UsageError(fmt::format("`resume` {}: {} is truncated ({} of {} payload bytes)", dir, path,
                                 data.size() - header, length));
  if (data.size() - header > length)
    throw UsageError(fmt::format("`resume` {}: {} is longer than its header says ({} payload bytes, the header says "
                                 "{}): something was written after it; restore it or start afresh without `resume`",
                                 dir, path, data.size() - header, length));
  std::string payload = data.substr(header);
  if (fnv1a64(payload) != sum)
    throw UsageError(fmt::format("`resume` {}: {} is corrupt (checksum mismatch); restore it or start afresh "
                                 "without `resume`",
                                 dir, path));
  return payload;
}

}  // namespace saturate

#include "saturate/core/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

enum class Kind { missing, regular, fifo, character_device, descriptor };

/// Where and how to write: `path` is the file to write (a symlink's final target for a
/// regular or missing file), `fd` the descriptor for /dev/stdout and alike.
struct Target {
  Kind kind = Kind::missing;
  std::string path;
  int fd = -1;
  bool has_mode = false;
  mode_t mode = 0;  // an existing regular file's permissions, kept by the replacement
};

std::string name_of(const std::string& path, const OutputFileOptions& o) {
  return o.label.empty() ? path : o.label + " " + path;
}

std::string parent_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

/// A failed write's cause in words, with what to do.
std::string write_cause(int err) {
  switch (err) {
    case ENOSPC:
      return "no space left on the device (ENOSPC); free some space or write to another disk";
    case EFBIG:
      return "the file size limit (ulimit -f) was reached (EFBIG); raise it (ulimit -f unlimited) or write "
             "to another place";
    case EDQUOT:
      return "the disk quota is used up (EDQUOT); free some space or write to another disk";
    case EROFS:
      return "the file system is read-only (EROFS); give a path on a writable disk";
    case EACCES:
    case EPERM:
      return fmt::format("permission denied ({}); give a path you can write", std::strerror(err));
    default:
      return fmt::format("{} (errno {})", std::strerror(err), err);
  }
}

[[noreturn]] void throw_write_failure(const std::string& path, const OutputFileOptions& o, int err) {
  throw RuntimeFailure(fmt::format("{}: writing failed: {}", name_of(path, o), write_cause(err)));
}

/// /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N name a descriptor of this process:
/// written through it, so that a shell's redirection (`> out.txt`) keeps its file and offset.
int descriptor_of(const std::string& path) {
  int fd = -1;
  if (path == "/dev/stdout") fd = 1;
  else if (path == "/dev/stderr") fd = 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const size_t n = std::strlen(prefix);
    if (path.size() > n && path.compare(0, n, prefix) == 0 && path.size() - n <= 9 &&
        path.find_first_not_of("0123456789", n) == std::string::npos)
      fd = std::atoi(path.c_str() + n);
  }
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return -1;
  return fd;
}

/// A dangling symlink's final target (the file a write through it creates).
std::string final_link_target(std::string p, const OutputFileOptions& o, const std::string& path, bool checking) {
  for (int i = 0; i < 40; ++i) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return p;
    const std::string link(buf, static_cast<size_t>(n));
    p = link[0] == '/' ? link : (std::filesystem::path(parent_of(p)) / link).string();
  }
  const std::string message = fmt::format("{}: too many levels of symbolic links; give a file path", name_of(path, o));
  if (checking) throw UsageError(message);
  throw RuntimeFailure(message);
}

std::string folder_advice(const std::string& path, const OutputFileOptions& o) {
  return fmt::format("give a file path such as {}", (std::filesystem::path(path) / o.suggested_name).string());
}

/// A path that cannot be written: bad input before the work (UsageError, from the check), a
/// failed write after it (RuntimeFailure); the same words.
[[noreturn]] void refuse(bool checking, const std::string& message) {
  if (checking) throw UsageError(message);
  throw RuntimeFailure(message);
}

/// What is at `path`, following symlinks; refuses what cannot be written as a file.
Target resolve(const std::string& path, const OutputFileOptions& o, bool checking) {
  const std::string name = name_of(path, o);
  if (path.empty())
    refuse(checking, fmt::format("{}: an empty path; give a file path", o.label.empty() ? "output" : o.label));
  Target t;
  t.fd = descriptor_of(path);
  if (t.fd >= 0) {
    t.kind = Kind::descriptor;
    t.path = path;
    return t;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    t.path = path;
    if (S_ISREG(st.st_mode)) {
      t.kind = Kind::regular;
      t.has_mode = true;
      t.mode = st.st_mode & 07777;
      struct stat lst {};
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {  // write the link's target; the link stays
        std::error_code ec;
        const auto real = std::filesystem::canonical(path, ec);
        if (!ec) t.path = real.string();
      }
      return t;
    }
    if (S_ISFIFO(st.st_mode)) {
      t.kind = Kind::fifo;
      return t;
    }
    if (S_ISCHR(st.st_mode)) {
      t.kind = Kind::character_device;
      return t;
    }
    if (S_ISDIR(st.st_mode))
      refuse(checking, fmt::format("{}: is a folder, not a file; {}", name, folder_advice(path, o)));
    const char* what = S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
    refuse(checking, fmt::format("{}: is {}, which saturate does not write to; give a regular file path (or a FIFO, "
                                 "or a character device such as /dev/stdout)",
                                 name, what));
  }
  const int err = errno;
  if (err != ENOENT)
    refuse(checking, fmt::format("{}: cannot open it for writing: {}; give a file path in a folder you can write",
                                 name, std::strerror(err)));
  t.kind = Kind::missing;
  t.path = final_link_target(path, o, path, checking);
  const std::string dir = parent_of(t.path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0)
    refuse(checking, fmt::format("{}: cannot open it for writing: the folder {} does not exist; create it first or "
                                 "give a path in an existing folder",
                                 name, dir));
  if (!S_ISDIR(dst.st_mode))
    refuse(checking, fmt::format("{}: cannot open it for writing: {} is not a folder; give a file path in a folder",
                                 name, dir));
  return t;
}

/// Writes all of `data`; retries short writes, EINTR and EAGAIN (a non-blocking descriptor). 0 or errno.
int write_all(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, -1);
        continue;
      }
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

int write_parts(int fd, const std::vector<std::string_view>& parts) {
  for (std::string_view part : parts)
    if (const int err = write_all(fd, part)) return err;
  return 0;
}

/// A new file with a unique name next to `target` (or in `folder` when given), opened for writing.
struct TempFile {
  std::string path;
  int fd = -1;
};

TempFile create_temp(const std::string& target, const std::string& folder, const Target& t,
                     const std::string& path, const OutputFileOptions& o) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const unsigned n = counter++;
    std::string tmp = folder.empty() ? fmt::format("{}.{}.{}.tmp", target, ::getpid(), n)
                                     : fmt::format("{}/saturate-output.{}.{}.tmp", folder, ::getpid(), n);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0 && errno == ENAMETOOLONG && folder.empty()) {  // a long name: a short one in the same folder
      tmp = fmt::format("{}/.saturate.{}.{}.tmp", parent_of(target), ::getpid(), n);
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    }
    if (fd >= 0) {
      if (t.has_mode) (void)::fchmod(fd, t.mode);  // the replacement keeps the file's permissions
      return {tmp, fd};
    }
    if (errno == EEXIST) continue;
    const int err = errno;
    throw RuntimeFailure(fmt::format("{}: cannot create a temporary file in {} to write it: {}", name_of(path, o),
                                     parent_of(tmp), write_cause(err)));
  }
  throw RuntimeFailure(fmt::format("{}: cannot find a free temporary file name next to it", name_of(path, o)));
}

/// fsyncs and closes the finished temporary and renames it over `t.path`; removes it on failure.
void commit_temp(TempFile& tmp, const Target& t, const std::string& path, const OutputFileOptions& o) {
  int err = ::fsync(tmp.fd) != 0 ? errno : 0;
  if (::close(tmp.fd) != 0 && err == 0) err = errno;  // NFS reports a full disk at close
  tmp.fd = -1;
  if (err != 0) {
    ::unlink(tmp.path.c_str());
    throw_write_failure(path, o, err);
  }
  if (::rename(tmp.path.c_str(), t.path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.path.c_str());
    throw RuntimeFailure(fmt::format("{}: cannot move the written file into place: {}", name_of(path, o),
                                     std::strerror(err)));
  }
  if (o.sync_directory) {
    const int dfd = ::open(parent_of(t.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // the rename itself must survive a crash
      ::close(dfd);
    }
  }
}

void write_atomically(const Target& t, const std::vector<std::string_view>& parts, const std::string& path,
                      const OutputFileOptions& o) {
  TempFile tmp = create_temp(t.path, "", t, path, o);
  if (const int err = write_parts(tmp.fd, parts)) {
    ::close(tmp.fd);
    ::unlink(tmp.path.c_str());
    throw_write_failure(path, o, err);
  }
  commit_temp(tmp, t, path, o);
}

/// A FIFO, a character device or a descriptor: written in place, never replaced.
void write_in_place(const Target& t, const std::vector<std::string_view>& parts, const std::string& path,
                    const OutputFileOptions& o) {
  if (t.kind == Kind::descriptor) {
    // what this process already wrote through the stream goes first
    if (t.fd == 1) {
      std::cout.flush();
      std::fflush(stdout);
    } else if (t.fd == 2) {
      std::cerr.flush();
      std::fflush(stderr);
    }
    if (const int err = write_parts(t.fd, parts)) throw_write_failure(path, o, err);
    return;
  }
  int fd;
  do {
    fd = ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);  // a FIFO waits here for its reader
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    throw RuntimeFailure(fmt::format("{}: cannot open it for writing: {}", name_of(path, o), write_cause(err)));
  }
  int err = write_parts(fd, parts);
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err != 0) throw_write_failure(path, o, err);
}

/// Why `write_to` failed writing `file`: a file size limit or a full disk when the file shows it.
std::string produce_failure_cause(const std::string& file, const std::string& message) {
  struct stat st {};
  struct rlimit rl {};
  if (::stat(file.c_str(), &st) == 0 && ::getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      static_cast<rlim_t>(st.st_size) >= rl.rlim_cur)
    return write_cause(EFBIG);
  struct statvfs vfs {};
  if (::statvfs(parent_of(file).c_str(), &vfs) == 0 && vfs.f_bavail == 0) return write_cause(ENOSPC);
  return message;
}

}  // namespace

void check_output_path(const std::string& path, const OutputFileOptions& o) {
  const Target t = resolve(path, o, true);
  if (t.kind == Kind::descriptor) return;
  const bool in_place = t.kind == Kind::fifo || t.kind == Kind::character_device;
  const std::string checked = in_place ? t.path : parent_of(t.path);
  if (::access(checked.c_str(), in_place ? W_OK : (W_OK | X_OK)) != 0) {
    const int err = errno;
    throw UsageError(fmt::format("{}: cannot open it for writing: {} is not writable ({}); give a path {}",
                                 name_of(path, o), in_place ? "it" : "the folder " + checked, std::strerror(err),
                                 in_place ? "you can write" : "in a folder you can write"));
  }
}

void write_output_file(const std::string& path, std::string_view content, const OutputFileOptions& o) {
  write_output_file(path, std::vector<std::string_view>{content}, o);
}

void write_output_file(const std::string& path, const std::vector<std::string_view>& parts,
                       const OutputFileOptions& o) {
  const Target t = resolve(path, o, false);
  if (t.kind == Kind::missing || t.kind == Kind::regular) write_atomically(t, parts, path, o);
  else write_in_place(t, parts, path, o);
}

void write_output_file_by_path(const std::string& path, const std::function<void(const std::string& file)>& write_to,
                               const OutputFileOptions& o) {
  const Target t = resolve(path, o, false);
  const bool atomic = t.kind == Kind::missing || t.kind == Kind::regular;
  std::error_code ec;
  std::string folder;  // a FIFO or a device: the temporary goes to the system's temporary folder
  if (!atomic) folder = std::filesystem::temp_directory_path(ec).string();
  if (!atomic && (ec || folder.empty())) folder = "/tmp";
  TempFile tmp = create_temp(t.path, folder, t, path, o);
  ::close(tmp.fd);
  tmp.fd = -1;
  const auto fail = [&](const std::string& message) {
    const std::string cause = produce_failure_cause(tmp.path, message);  // before the file goes
    ::unlink(tmp.path.c_str());
    throw RuntimeFailure(fmt::format("{}: writing failed: {}", name_of(path, o), cause));
  };
  try {
    write_to(tmp.path);
  } catch (const c10::Error& e) {
    fail(e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (atomic) {
    tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (tmp.fd < 0) fail(fmt::format("the written temporary {} is gone: {}", tmp.path, std::strerror(errno)));
    commit_temp(tmp, t, path, o);
    return;
  }
  // a FIFO, a device or a descriptor: copy the bytes in, then drop the temporary
  try {
    std::FILE* in = std::fopen(tmp.path.c_str(), "rb");
    if (!in) fail(fmt::format("cannot read back the temporary {}: {}", tmp.path, std::strerror(errno)));
    std::string content;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) content.append(buf, n);
    std::fclose(in);
    write_in_place(t, {content}, path, o);
  } catch (...) {
    ::unlink(tmp.path.c_str());
    throw;
  }
  ::unlink(tmp.path.c_str());
}

}  // namespace saturate

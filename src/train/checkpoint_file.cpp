#include "saturate/train/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

constexpr char kMagic[8] = {'S', 'A', 'T', 'C', 'K', 'P', 'T', '1'};

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw RuntimeFailure(fmt::format("checkpoint {}: write failed: {} (disk full?)", path, std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
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

std::string checkpoint_path(const std::string& dir) { return dir + "/checkpoint.pt"; }

void write_checkpoint_file(const std::string& dir, const std::string& payload) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw RuntimeFailure(fmt::format("--checkpoint-dir {}: cannot create it: {}", dir, ec.message()));
  const std::string final_path = checkpoint_path(dir);
  const std::string tmp = final_path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeFailure(fmt::format("checkpoint {}: cannot write: {}", tmp, std::strerror(errno)));
  try {
    const uint64_t length = payload.size();
    const uint64_t sum = fnv1a64(payload);
    write_all(fd, kMagic, sizeof kMagic, tmp);
    write_all(fd, reinterpret_cast<const char*>(&length), sizeof length, tmp);
    write_all(fd, reinterpret_cast<const char*>(&sum), sizeof sum, tmp);
    write_all(fd, payload.data(), payload.size(), tmp);
    if (::fsync(fd) != 0) throw RuntimeFailure(fmt::format("checkpoint {}: fsync failed: {}", tmp, std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), final_path.c_str()) != 0)
    throw RuntimeFailure(fmt::format("checkpoint {}: rename failed: {}", final_path, std::strerror(errno)));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the rename itself must survive a crash
    ::close(dfd);
  }
}

std::string read_checkpoint_file(const std::string& dir) {
  const std::string path = checkpoint_path(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UsageError(fmt::format("--resume {}: no checkpoint there ({} is missing); give the folder a run wrote "
                                 "with --checkpoint-dir",
                                 dir, path));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  const size_t header = sizeof kMagic + 2 * sizeof(uint64_t);
  if (data.size() < header || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    throw UsageError(fmt::format("--resume {}: {} is not a saturate checkpoint (bad header)", dir, path));
  uint64_t length = 0, sum = 0;
  std::memcpy(&length, data.data() + sizeof kMagic, sizeof length);
  std::memcpy(&sum, data.data() + sizeof kMagic + sizeof length, sizeof sum);
  if (data.size() - header != length)
    throw UsageError(fmt::format("--resume {}: {} is truncated ({} of {} payload bytes)", dir, path,
                                 data.size() - header, length));
  std::string payload = data.substr(header);
  if (fnv1a64(payload) != sum)
    throw UsageError(fmt::format("--resume {}: {} is corrupt (checksum mismatch); restore it or start afresh "
                                 "without --resume",
                                 dir, path));
  return payload;
}

}  // namespace saturate

#include "saturate/train/checkpoint_file.h"

#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/output_file.h"

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

std::string checkpoint_path(const std::string& dir) { return dir + "/checkpoint.pt"; }

void write_checkpoint_file(const std::string& dir, const std::string& payload) {
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

std::string read_checkpoint_file(const std::string& dir) {
  const std::string path = checkpoint_path(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UsageError(fmt::format("`resume` {}: no checkpoint there ({} is missing); give the folder a run wrote "
                                 "with `checkpoint_dir`",
                                 dir, path));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  const size_t header = sizeof kMagic + 2 * sizeof(uint64_t);
  if (data.size() < header || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    throw UsageError(fmt::format("`resume` {}: {} is not a saturate checkpoint (bad header)", dir, path));
  uint64_t length = 0, sum = 0;
  std::memcpy(&length, data.data() + sizeof kMagic, sizeof length);
  std::memcpy(&sum, data.data() + sizeof kMagic + sizeof length, sizeof sum);
  if (data.size() - header != length)
    throw UsageError(fmt::format("`resume` {}: {} is truncated ({} of {} payload bytes)", dir, path,
                                 data.size() - header, length));
  std::string payload = data.substr(header);
  if (fnv1a64(payload) != sum)
    throw UsageError(fmt::format("`resume` {}: {} is corrupt (checksum mismatch); restore it or start afresh "
                                 "without `resume`",
                                 dir, path));
  return payload;
}

}  // namespace saturate

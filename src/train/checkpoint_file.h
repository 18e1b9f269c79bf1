// Implements: training checkpoints that never leave a half-written file behind. The state is
// serialised to memory, written to a temporary DIR/checkpoint.pt.PID.N.tmp, fsynced, renamed
// over DIR/checkpoint.pt and the folder fsynced (core/output_file.h): a crash (even SIGKILL
// mid-write) leaves the previous complete checkpoint. A header carries a magic, the payload length and a 64-bit FNV-1a
// checksum, verified on load.
// A checkpoint folder has one writer at a time: CheckpointLock holds an advisory lock (flock) on
// DIR/.saturate.lock with the owner's pid and host in it; the kernel releases it when the owner
// exits, however it exits, so a lock is never stale.
#pragma once
#include <cstdint>
#include <string>

#include "saturate/core/output_file.h"  // the writer under checkpoints and the trainer's save_model

namespace saturate {

/// The checkpoint's path inside `dir`, and the names of the files a run writes there.
std::string checkpoint_path(const std::string& dir);
const char* checkpoint_file_name();       ///< "checkpoint.pt"
const char* checkpoint_lock_file_name();  ///< ".saturate.lock"

/// Checks before any work that checkpoints can be written into `dir` (for `option`, e.g.
/// "checkpoint_dir"): a folder that can be written, or a missing one whose nearest existing
/// parent can be. UsageError naming the path and what is wrong (a regular file, read-only).
void check_checkpoint_dir(const std::string& dir, const std::string& option);

/// The one writer of a checkpoint folder (created if missing). A second run on the same folder
/// gets a UsageError naming the owner's pid and host; the lock ends with this object or the
/// process. The lock file is opened without following links: a symlink, a hard link or anything
/// but a plain file there is a UsageError naming it (nothing is written through it). While held,
/// write_checkpoint_file into the folder first checks that the lock is still the same file (a
/// folder removed or replaced under the run is a RuntimeFailure, not a new unlocked folder).
class CheckpointLock {
 public:
  CheckpointLock() = default;
  explicit CheckpointLock(const std::string& dir);
  CheckpointLock(CheckpointLock&& other) noexcept : fd_(other.fd_), dir_(std::move(other.dir_)) { other.fd_ = -1; }
  CheckpointLock& operator=(CheckpointLock&& other) noexcept;
  ~CheckpointLock();
  bool held() const { return fd_ >= 0; }

 private:
  void release();
  int fd_ = -1;
  std::string dir_;
};

/// Writes `payload` atomically as DIR/checkpoint.pt (creating DIR). Throws RuntimeFailure.
void write_checkpoint_file(const std::string& dir, const std::string& payload);

/// Reads and verifies DIR/checkpoint.pt, reading no more than `max_bytes` (what the model's
/// state can take: a larger file is refused before it is read, as is anything but a regular file).
/// Throws UsageError when missing, too large, truncated or corrupt.
std::string read_checkpoint_file(const std::string& dir, int64_t max_bytes = INT64_MAX);

/// 64-bit FNV-1a of `data`.
uint64_t fnv1a64(const std::string& data);

}  // namespace saturate

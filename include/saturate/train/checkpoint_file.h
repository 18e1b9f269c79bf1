// Implements: training checkpoints that never leave a half-written file behind. The state is
// serialised to memory, written to a temporary DIR/checkpoint.pt.PID.N.tmp, fsynced, renamed
// over DIR/checkpoint.pt and the folder fsynced (core/output_file.h): a crash (even SIGKILL
// mid-write) leaves the previous complete checkpoint. A header carries a magic, the payload length and a 64-bit FNV-1a
// checksum, verified on load.
#pragma once
#include <string>

#include "saturate/core/output_file.h"  // the writer under checkpoints and the trainer's save_model

namespace saturate {

/// The checkpoint's path inside `dir`.
std::string checkpoint_path(const std::string& dir);

/// Writes `payload` atomically as DIR/checkpoint.pt (creating DIR). Throws RuntimeFailure.
void write_checkpoint_file(const std::string& dir, const std::string& payload);

/// Reads and verifies DIR/checkpoint.pt. Throws UsageError when missing, truncated or corrupt.
std::string read_checkpoint_file(const std::string& dir);

/// 64-bit FNV-1a of `data`.
uint64_t fnv1a64(const std::string& data);

}  // namespace saturate

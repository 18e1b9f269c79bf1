// Implements: writing a file the user named (--json, --save, --trace, --timeline, --log, the
// checkpoint) as the user meant it, never replacing what is at the path and never leaving a
// temporary behind:
//  - a missing path or a regular file: written atomically: a temporary with a unique name in the
//    same folder, fsynced, renamed over the target (an existing file keeps its permissions); the
//    temporary is removed on any failure, so a crash or a full disk leaves the previous file;
//  - a symlink: followed; its target is written as above (the link stays a link), a dangling
//    link creates its target;
//  - a FIFO, a character device (/dev/null, /dev/full, a terminal) or an open descriptor named
//    /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: opened and written in place;
//  - a directory, a block device or a socket: refused, naming the path and what to give.
// Errors name the path, the cause and what to give instead: check_output_path, run before the
// work, throws UsageError (the path is bad input); the writers throw RuntimeFailure, for a refused
// path as for a failed write (ENOSPC, EFBIG from `ulimit -f`, EDQUOT, EROFS). Nothing here prints.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace saturate {

struct OutputFileOptions {
  /// What names the file in messages, e.g. "--json" gives "--json out/: ...". Empty: the path alone.
  std::string label;
  /// A file name to suggest when the path is a folder ("give a file path such as DIR/NAME").
  std::string suggested_name = "output";
  /// fsync the target's folder after the rename, so that the rename itself survives a crash
  /// (checkpoints).
  bool sync_directory = false;
};

/// Checks before the work that `path` can be written as write_output_file would, creating,
/// opening and replacing nothing (a FIFO is not opened, so no reader sees an end of file).
/// Throws UsageError for a folder, a block device or a socket at the path, a missing folder
/// or one that cannot be written.
void check_output_path(const std::string& path, const OutputFileOptions& options = {});

/// Writes `content` to `path` as the header describes. Throws RuntimeFailure.
void write_output_file(const std::string& path, std::string_view content, const OutputFileOptions& options = {});

/// The same, with the content given in parts written one after the other (a header and a
/// payload without copying them together).
void write_output_file(const std::string& path, const std::vector<std::string_view>& parts,
                       const OutputFileOptions& options = {});

/// For writers that only write by path (torch::save): `write_to(file)` writes the whole content to
/// `file`, which is a temporary. A regular or missing target: the temporary sits next to it and is
/// renamed over it; a FIFO, a device or a descriptor: the temporary sits in the system's temporary
/// folder and its bytes are copied into the target. The temporary never stays. An exception from
/// `write_to` becomes a RuntimeFailure naming the path and the cause.
void write_output_file_by_path(const std::string& path, const std::function<void(const std::string& file)>& write_to,
                               const OutputFileOptions& options = {});

}  // namespace saturate

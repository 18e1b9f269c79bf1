// Implements: one check of every path a command reads and writes, before any work, so that no
// output replaces an input or another output. Each path is resolved to what it names: an
// existing file by device and inode (symlinks followed, hard links seen as one), a missing one
// by its canonical path. A folder the command writes in (a checkpoint folder) stands for the files
// it writes there. FIFOs and character devices (/dev/null, /dev/stdout into a terminal) are
// never a clash: writing them replaces nothing. Nothing here prints.
#pragma once
#include <string>
#include <vector>

namespace saturate {

enum class PathRole {
  kInput,        ///< read (a model, a token file, a run's JSON)
  kOutput,       ///< written (a summary, a model, a trace)
  kOutputFolder  ///< a folder written into (checkpoints): its files are what clashes
};

struct PathUse {
  std::string option;  ///< the option that names the path ("json", "save"), said in messages
  std::string path;
  PathRole role = PathRole::kInput;
  /// kOutputFolder: the files written inside the folder (names relative to it).
  std::vector<std::string> files;
};

/// Throws UsageError (about the later option) when an output is the same file as an input or as
/// another output, naming both options and the file: "`json` v.pt is the same file as `model`
/// v.pt; it would be overwritten: give `json` another path". An input that is a folder (a
/// dataset's files) stands for everything in it: an output (or output folder) inside it, through
/// any symlink, or a hard link to one of its files, is refused naming both. Empty paths and "-"
/// are skipped.
void check_path_plan(const std::vector<PathUse>& uses);

}  // namespace saturate

#include "saturate/core/path_plan.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

/// What a path names: an existing file's device and inode, or a missing file's canonical path.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  std::string missing;  ///< non-empty: the file does not exist yet
  bool operator==(const FileIdentity& o) const {
    return missing.empty() == o.missing.empty() &&
           (missing.empty() ? device == o.device && inode == o.inode : missing == o.missing);
  }
};

/// nullopt for what writing never replaces (a FIFO, a character device) and for folders.
std::optional<FileIdentity> identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISDIR(st.st_mode)) return std::nullopt;
    return FileIdentity{st.st_dev, st.st_ino, {}};
  }
  // a dangling symlink names the file its target will be
  std::filesystem::path target = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(target, ec); ++hops) {
    const std::filesystem::path next = std::filesystem::read_symlink(target, ec);
    if (ec) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(target, ec);
  return FileIdentity{0, 0, ec ? std::filesystem::absolute(target, ec).lexically_normal().string() : canonical.string()};
}

struct Named {
  const PathUse* use;
  std::string file;  ///< the path itself, or a file inside an output folder
  FileIdentity id;
  bool output;
};

std::string said(const Named& n) {
  return n.file == n.use->path ? fmt::format("`{}` {}", n.use->option, n.use->path)
                               : fmt::format("`{}` {} (its {})", n.use->option, n.use->path, n.file);
}

}  // namespace

void check_path_plan(const std::vector<PathUse>& uses) {
  std::vector<Named> named;
  for (const PathUse& use : uses) {
    if (use.path.empty() || use.path == "-") continue;
    if (use.role == PathRole::kOutputFolder) {
      for (const std::string& file : use.files) {
        const std::string inside = (std::filesystem::path(use.path) / file).string();
        if (auto id = identity(inside)) named.push_back({&use, inside, *id, true});
      }
    } else if (auto id = identity(use.path)) {
      named.push_back({&use, use.path, *id, use.role == PathRole::kOutput});
    }
  }
  for (size_t later = 0; later < named.size(); ++later)
    for (size_t earlier = 0; earlier < later; ++earlier) {
      const Named& a = named[earlier];
      const Named& b = named[later];
      const bool a_folder = a.use->role == PathRole::kOutputFolder, b_folder = b.use->role == PathRole::kOutputFolder;
      // two names of one checkpoint folder (resume and checkpoint_dir) are one output
      if (a.use == b.use || !(a.output || b.output) || !(a.id == b.id) || (a_folder && b_folder)) continue;
      // the one to move: a file output rather than the folder it would land in (the later if both are)
      const Named& written = b.output && !b_folder ? b : a.output && !a_folder ? a : b;
      const Named& other = &written == &b ? a : b;
      throw UsageError(fmt::format("{} is the same file as {}: writing it would {}; give `{}` another path",
                                   said(written), said(other),
                                   other.output ? "replace the other output" : "overwrite the input",
                                   written.use->option));
    }
}

}  // namespace saturate

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

/// The file a write through `path` lands in: its symlinks followed to the last (possibly
/// dangling) target, at most 40 hops.
std::filesystem::path final_target(std::filesystem::path target) {
  std::error_code ec;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(target, ec); ++hops) {
    const std::filesystem::path next = std::filesystem::read_symlink(target, ec);
    if (ec) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target;
}

/// nullopt for what writing never replaces (a FIFO, a character device) and for folders.
std::optional<FileIdentity> identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISDIR(st.st_mode)) return std::nullopt;
    return FileIdentity{st.st_dev, st.st_ino, {}};
  }
  // a dangling symlink names the file its target will be
  const std::filesystem::path target = final_target(path);
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(target, ec);
  return FileIdentity{0, 0, ec ? std::filesystem::absolute(target, ec).lexically_normal().string() : canonical.string()};
}

/// An input that is a folder (a dataset of files): every output is checked for lying inside it.
struct InputFolder {
  const PathUse* use;
  dev_t device = 0;
  ino_t inode = 0;
};

/// The folders an output is written in: as named (its parent, symlinks in the folders resolved)
/// and, when the path itself is a symlink, its final target's. For an output folder, itself.
std::vector<std::filesystem::path> written_in(const std::string& path, bool folder) {
  std::error_code ec;
  std::vector<std::filesystem::path> out;
  const std::filesystem::path named = std::filesystem::absolute(path, ec);
  out.push_back(std::filesystem::weakly_canonical(folder ? named : named.parent_path(), ec));
  const std::filesystem::path target = final_target(named);
  const std::filesystem::path final_folder = std::filesystem::weakly_canonical(folder ? target : target.parent_path(), ec);
  if (final_folder != out.front()) out.push_back(final_folder);
  return out;
}

/// The input folder that `path` (written as a file, or as a folder when `folder`) lies in, if any:
/// by device and inode of each folder on its way up to the root, so that a symlink or a bind mount
/// to the input folder is seen through.
const InputFolder* inside(const std::vector<InputFolder>& folders, const std::string& path, bool folder) {
  if (folders.empty()) return nullptr;
  for (std::filesystem::path p : written_in(path, folder))
    for (int depth = 0; depth < 4096; ++depth) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0)
        for (const InputFolder& f : folders)
          if (f.device == st.st_dev && f.inode == st.st_ino) return &f;
      if (p == p.parent_path() || p.empty()) break;
      p = p.parent_path();
    }
  return nullptr;
}

/// An existing output file that is one of the files an input folder reads, under another name
/// (a hard link, or a symlink in the folder pointing at it): found by walking the folder, links
/// followed (at most `kMostEntries` entries; a folder with more is walked that far).
const InputFolder* read_through_input_folder(const std::vector<InputFolder>& folders, const std::string& path) {
  struct stat st {};
  if (folders.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  constexpr int kMostEntries = 200000;
  for (const InputFolder& f : folders) {
    std::error_code ec;
    int seen = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(
             f.use->path, std::filesystem::directory_options::skip_permission_denied, ec);
         !ec && it != std::filesystem::recursive_directory_iterator() && seen < kMostEntries; it.increment(ec), ++seen) {
      struct stat in {};
      if (::stat(it->path().c_str(), &in) == 0 && S_ISREG(in.st_mode) && in.st_dev == st.st_dev &&
          in.st_ino == st.st_ino)
        return &f;
    }
  }
  return nullptr;
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
  std::vector<InputFolder> folders;
  for (const PathUse& use : uses) {
    struct stat st {};
    if (use.role == PathRole::kInput && !use.path.empty() && ::stat(use.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      folders.push_back({&use, st.st_dev, st.st_ino});
  }
  // an output inside an input folder (a dataset's folder of files) would overwrite one of its
  // files or add one that the next run reads as data
  for (const PathUse& use : uses) {
    if (use.path.empty() || use.path == "-" || use.role == PathRole::kInput) continue;
    struct stat st {};
    const bool stream = ::stat(use.path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
    if (stream) continue;  // writing a FIFO or a device replaces nothing
    const bool folder = use.role == PathRole::kOutputFolder;
    const InputFolder* in = inside(folders, use.path, folder);
    const bool linked = !in && !folder && (in = read_through_input_folder(folders, use.path)) != nullptr;
    if (in)
      throw UsageError(fmt::format(
          "`{}` {} {} `{}` {}: writing it would {} the input data; give `{}` a path outside {}", use.option,
          use.path, linked ? "is a file read through a link in" : "is inside the folder of", in->use->option,
          in->use->path, linked ? "overwrite" : folder ? "add files to" : "overwrite or add to", use.option,
          in->use->path));
  }
  std::vector<Named> named;
  for (const PathUse& use : uses) {
    if (use.path.empty() || use.path == "-") continue;
    if (use.role == PathRole::kOutputFolder) {
      for (const std::string& file : use.files) {
        const std::string inside = (std::filesystem::path(use.path) / file).string();
        if (auto id = identity(inside)) named.push_back({&use, inside, *id, true});
      }
    } else if (auto id = identity(use.path)) {
      if (use.role == PathRole::kInput && !id->missing.empty()) continue;  // no file there (a zoo name): nothing to lose
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

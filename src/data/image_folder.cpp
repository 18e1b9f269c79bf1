// Implements: a folder of images, one sub-folder per class (torchvision's ImageFolder layout):
// classes are the sub-folder names in sorted order; files ending .jpg/.jpeg/.png are samples
// (others are ignored). Files are read and decoded by the loader's workers, not at open.
// With DatasetOptions::val_fraction, the split ("train" or "val") keeps its side of the hold-out,
// keyed by each file's path relative to DIR ("cats/a.png").
#include "formats.h"

namespace saturate::data {
namespace {

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(const std::string& dir, const DatasetOptions& o) {
    if (!is_directory(dir)) throw UsageError("`data` images:" + dir + ": no such folder");
    std::vector<std::string> empty_classes, keys;  // keys: "class/file", for the val split
    // the table of paths is bounded by the budget too: a folder of millions of files is refused
    HeldBytes held("images:" + dir, "images", "their paths, labels and split keys", o.held_budget_bytes);
    for (const auto& cls : list_dir(dir)) {
      const std::string sub = join_path(dir, cls);
      if (!is_directory(sub)) continue;
      const auto label = static_cast<int64_t>(class_names_.size());
      class_names_.push_back(cls);
      size_t found = 0;
      for (const auto& f : list_dir(sub)) {
        const std::string l = lower(f);
        if (!(ends_with(l, ".jpg") || ends_with(l, ".jpeg") || ends_with(l, ".png"))) continue;
        files_.push_back({join_path(sub, f), label});
        keys.push_back(cls + "/" + f);
        held.add(static_cast<int64_t>(sizeof(File) + sizeof(std::string) + files_.back().path.size() +
                                      keys.back().size()));
        ++found;
      }
      if (found == 0) empty_classes.push_back(sub);
    }
    if (class_names_.empty())
      throw DataError(dir, -1, "no class sub-folders (images:DIR expects DIR/<class>/<image>.jpg|.png)");
    if (files_.empty()) throw DataError(dir, -1, "no .jpg/.jpeg/.png images in its " + std::to_string(class_names_.size()) + " class folder(s)");
    if (!empty_classes.empty()) {
      // a class with no images still takes a label: say so rather than train a class never seen.
      DataError e(empty_classes[0], -1, "empty class folder (no .jpg/.jpeg/.png images)");
      if (!o.skip_bad_samples) throw e;
      open_skips_.add(e.what(), 0);
    }
    if (o.val_fraction > 0 || o.split != "train") {
      const std::vector<bool> keep = keep_for_split(keys, o, "images:" + dir);
      std::vector<File> kept;
      for (size_t i = 0; i < files_.size(); ++i)
        if (keep[i]) kept.push_back(std::move(files_[i]));
      files_ = std::move(kept);
    }
    // the first sample that decodes gives the shape (skip mode: bad ones are met again later).
    for (size_t i = 0; i < files_.size() && shape_.empty(); ++i) {
      try {
        const std::vector<uint8_t> bytes = read_file(files_[i].path);
        shape_ = image_shape(bytes.data(), bytes.size(), files_[i].path);
      } catch (const DataError&) {
        if (!o.skip_bad_samples) throw;
      }
    }
    if (shape_.empty()) throw DataError(dir, -1, "no image in the folder could be decoded");
    name_ = "images:" + dir + split_suffix(o);
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t classes() const override { return static_cast<int64_t>(class_names_.size()); }
  SampleShape shape() const override { return shape_; }

  int64_t get(int64_t index, int64_t channels, Image& out) const override {
    const File& f = files_.at(static_cast<size_t>(index));
    const std::vector<uint8_t> bytes = read_file(f.path);
    decode_image(bytes.data(), bytes.size(), channels, f.path, out);
    return f.label;
  }

  std::string locate(int64_t index) const override { return files_.at(static_cast<size_t>(index)).path; }

 private:
  struct File {
    std::string path;
    int64_t label;
  };
  std::string name_;
  std::vector<std::string> class_names_;
  std::vector<File> files_;
  SampleShape shape_;
};

}  // namespace
}  // namespace saturate::data

namespace saturate {

std::unique_ptr<Dataset> open_image_folder(const std::string& dir, const DatasetOptions& o) {
  return std::make_unique<data::ImageFolderDataset>(dir, o);
}
}  // namespace saturate

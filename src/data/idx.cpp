// Implements: IDX files (MNIST, Fashion-MNIST): header checks and the images/labels dataset.
// Magic: two zero bytes, a type code (0x08: unsigned byte, the only one image sets use) and the
// dimension count; then big-endian 32-bit sizes; then the data.
#include <algorithm>

#include "formats.h"

namespace saturate::data {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 7; i >= 0; --i) s += digits[(v >> (4 * i)) & 0xf];
  return s;
}

}  // namespace

IdxHeader parse_idx(const uint8_t* data, size_t size, const std::string& file) {
  if (size < 4) throw DataError(file, 0, "too short for an IDX header (" + std::to_string(size) + " bytes)");
  const uint32_t magic = be32(data);
  if (data[0] != 0 || data[1] != 0 || data[3] < 1 || data[3] > 4)
    throw DataError(file, 0, "bad IDX magic " + hex32(magic) +
                                 " (expected 0x000008NN: two zero bytes, type 0x08, 1-4 dimensions); is it an IDX file?");
  if (data[2] != 0x08)
    throw DataError(file, 2, "IDX type code 0x" + hex32(data[2]).substr(8) +
                                 " is not supported (only 0x08, unsigned bytes, as image data sets use)");
  IdxHeader h;
  const int ndim = data[3];
  h.data_offset = 4 + 4 * ndim;
  if (size < static_cast<size_t>(h.data_offset))
    throw DataError(file, static_cast<int64_t>(size), "truncated IDX header (" + std::to_string(ndim) + " dimensions need " +
                                                          std::to_string(h.data_offset) + " bytes)");
  h.item_bytes = 1;
  for (int i = 0; i < ndim; ++i) {
    const int64_t d = be32(data + 4 + 4 * i);
    if (i > 0 && (d < 1 || d > kMaxImageSide))
      throw DataError(file, 4 + 4 * i, "implausible IDX dimension " + std::to_string(d));
    h.dims.push_back(d);
    if (i > 0) h.item_bytes *= d;
    if (h.item_bytes > (int64_t{1} << 30)) throw DataError(file, 4 + 4 * i, "IDX items larger than 1 GiB");
  }
  const int64_t body = static_cast<int64_t>(size) - h.data_offset;
  h.complete_items = std::min<int64_t>(h.dims[0], body / h.item_bytes);
  return h;
}

namespace {

class IdxDataset final : public Dataset {
 public:
  IdxDataset(const std::string& images_file, const std::string& labels_file, const DatasetOptions& o)
      : images_file_(images_file), labels_file_(labels_file) {
    const bool skip = o.skip_bad_samples;
    bool images_cut = false, labels_cut = false;
    images_ = read_file(images_file, skip ? &images_cut : nullptr);
    labels_ = read_file(labels_file, skip ? &labels_cut : nullptr);
    const IdxHeader ih = parse_idx(images_.data(), images_.size(), images_file);
    const IdxHeader lh = parse_idx(labels_.data(), labels_.size(), labels_file);
    if (ih.dims.size() != 3 && ih.dims.size() != 4)
      throw DataError(images_file, 3, "an IDX image file has 3 dimensions (count, rows, columns) or 4 (with channels); "
                                      "this one has " + std::to_string(ih.dims.size()));
    if (lh.dims.size() != 1)
      throw DataError(labels_file, 3, "an IDX label file has 1 dimension (count); this one has " +
                                          std::to_string(lh.dims.size()) + "; are images and labels swapped?");
    shape_ = {ih.dims.size() == 4 ? ih.dims[3] : 1, ih.dims[1], ih.dims[2]};
    images_offset_ = ih.data_offset;
    labels_offset_ = lh.data_offset;
    item_bytes_ = ih.item_bytes;
    const auto short_by = [](const IdxHeader& h, int64_t size) { return h.data_offset + h.dims[0] * h.item_bytes - size; };
    if (ih.complete_items < ih.dims[0] && !skip)
      throw DataError(images_file, images_offset_ + ih.complete_items * item_bytes_,
                      "truncated: the header declares " + std::to_string(ih.dims[0]) + " images of " +
                          std::to_string(item_bytes_) + " bytes but the file ends after " +
                          std::to_string(ih.complete_items) + " (" +
                          std::to_string(short_by(ih, static_cast<int64_t>(images_.size()))) + " bytes short)");
    if (lh.complete_items < lh.dims[0] && !skip)
      throw DataError(labels_file, labels_offset_ + lh.complete_items,
                      "truncated: the header declares " + std::to_string(lh.dims[0]) +
                          " labels but the file ends after " + std::to_string(lh.complete_items));
    if (ih.dims[0] != lh.dims[0] && !skip)
      throw DataError(labels_file, 4, std::to_string(lh.dims[0]) + " labels for " + std::to_string(ih.dims[0]) +
                                          " images in " + images_file + "; the files do not belong together");
    const int64_t usable = std::min(ih.complete_items, lh.complete_items);
    const int64_t declared = std::max(ih.dims[0], lh.dims[0]);
    if (usable < declared)
      open_skips_.add(images_file + ": " + std::to_string(declared - usable) +
                          " samples missing (truncated or unmatched images/labels)",
                      declared - usable);
    classes_ = 10;  // the MNIST family; a larger label is an error, not a new class
    index_.reserve(static_cast<size_t>(usable));
    for (int64_t i = 0; i < usable; ++i) {
      const int64_t label = labels_[static_cast<size_t>(labels_offset_ + i)];
      if (label >= classes_) {
        DataError e(labels_file, labels_offset_ + i,
                    "label " + std::to_string(label) + " of sample " + std::to_string(i) + " is out of range [0, " +
                        std::to_string(classes_) + ")");
        if (!skip) throw e;
        open_skips_.add(e.what());
        continue;
      }
      index_.push_back(i);
    }
    if (index_.empty()) throw DataError(images_file, -1, "no usable samples");
    name_ = "idx:" + images_file;
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(index_.size()); }
  int64_t classes() const override { return classes_; }
  SampleShape shape() const override { return shape_; }

  int64_t get(int64_t index, int64_t, Image& out) const override {
    const int64_t i = index_.at(static_cast<size_t>(index));
    // IDX stores rows of columns (of channels for 4-d files): already HWC.
    out.resize(shape_.height, shape_.width, shape_.channels);
    const uint8_t* src = images_.data() + images_offset_ + i * item_bytes_;
    std::copy(src, src + item_bytes_, out.pixels.begin());
    return labels_[static_cast<size_t>(labels_offset_ + i)];
  }

  std::string locate(int64_t index) const override {
    const int64_t i = index_.at(static_cast<size_t>(index));
    return images_file_ + " at byte " + std::to_string(images_offset_ + i * item_bytes_);
  }

 private:
  std::string images_file_, labels_file_, name_;
  std::vector<uint8_t> images_, labels_;
  int64_t images_offset_ = 0, labels_offset_ = 0, item_bytes_ = 0, classes_ = 10;
  SampleShape shape_;
  std::vector<int64_t> index_;  // usable sample -> record
};

/// The images file of `split` in `dir` ("train-images-idx3-ubyte", ".gz", "train-images.idx3-ubyte").
std::string find_images_file(const std::string& dir, const std::string& split) {
  const std::vector<std::string> names = list_dir(dir);
  std::vector<std::string> candidates;
  for (const auto& n : names)
    if (n.find("images") != std::string::npos && n.find("idx3") != std::string::npos) candidates.push_back(n);
  const std::string prefix = split == "test" ? "t10k" : split;
  for (const auto& n : candidates)
    if (n.rfind(prefix, 0) == 0 || n.rfind(split, 0) == 0) return join_path(dir, n);
  if (candidates.size() == 1) return join_path(dir, candidates[0]);
  if (candidates.empty())
    throw UsageError("`data` idx:" + dir + ": no IDX images file (*images*idx3*) in the folder");
  throw UsageError("`data` idx:" + dir + ": several IDX images files and none for the '" + split + "' split");
}

std::string labels_file_for(const std::string& images_path) {
  std::string p = images_path;
  const size_t slash = p.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t at = p.find("images", base);
  p.replace(at, 6, "labels");
  at = p.find("idx3", base);
  p.replace(at, 4, "idx1");
  return p;
}

}  // namespace
}  // namespace saturate::data

namespace saturate {

std::unique_ptr<Dataset> open_idx(const std::string& images_file, const std::string& labels_file,
                                  const DatasetOptions& o) {
  return std::make_unique<data::IdxDataset>(images_file, labels_file, o);
}

std::unique_ptr<Dataset> open_idx_dir(const std::string& dir, const DatasetOptions& o) {
  if (!data::is_directory(dir)) throw UsageError("`data` idx:" + dir + ": no such folder");
  const std::string images = data::find_images_file(dir, o.split);
  std::string labels = data::labels_file_for(images);
  if (!data::is_regular_file(labels)) {
    // the pair may differ in compression only
    const std::string alt = data::ends_with(labels, ".gz") ? labels.substr(0, labels.size() - 3) : labels + ".gz";
    if (data::is_regular_file(alt)) labels = alt;
    else throw UsageError("`data` idx:" + dir + ": " + images + " has no labels file (" + labels + ")");
  }
  return open_idx(images, labels, o);
}

}  // namespace saturate

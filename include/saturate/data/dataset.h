// Implements: one interface over every input format, and opening a dataset from a --data spec.
//   fashion-mnist            the real Fashion-MNIST (Debian's dataset-fashion-mnist package)
//   idx:DIR                  an IDX images/labels pair (MNIST family), plain or .gz
//   cifar10:DIR, cifar100:DIR  CIFAR binary batches
//   images:DIR               one sub-folder per class of JPEG / PNG files
//   wds:DIR | wds:GLOB       WebDataset tar shards (.jpg/.png/.cls/.txt members grouped by key)
//   synthetic                random images made on the fly (the shape and classes of the model)
// images: and wds: data have no test split; `val_fraction` holds out a deterministic share of
// their samples as a "val" split (held_out_keys below).
// Samples come back decoded as 8-bit HWC pixels; nothing here touches LibTorch, so parsing is
// cheap to compile and can be fuzzed on its own.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "saturate/data/data_error.h"

namespace saturate {

struct SampleShape {
  int64_t channels = 0, height = 0, width = 0;
  bool empty() const { return channels <= 0 || height <= 0 || width <= 0; }
  int64_t numel() const { return channels * height * width; }
};
/// "3x32x32".
std::string to_string(const SampleShape& s);

/// One decoded sample: 8-bit pixels, rows of interleaved channels (HWC).
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
  void resize(int64_t h, int64_t w, int64_t c) {
    height = h;
    width = w;
    channels = c;
    pixels.resize(static_cast<size_t>(h * w * c));
  }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  /// The spec it was opened from, e.g. "idx:/usr/share/datasets/fashion-mnist (train)".
  virtual std::string name() const = 0;
  /// Usable samples (after samples skipped while opening).
  virtual int64_t size() const = 0;
  /// Labels are in [0, classes()).
  virtual int64_t classes() const = 0;
  /// A sample's shape as stored (the first sample's, for folders of images).
  virtual SampleShape shape() const = 0;
  /// Decodes sample `index` into `out` and returns its label. Thread-safe. `channels_hint`
  /// (0: as stored) lets decoders convert colour cheaply; the result may still differ.
  /// Throws DataError naming the file and offset.
  virtual int64_t get(int64_t index, int64_t channels_hint, Image& out) const = 0;
  /// Where sample `index` lives ("FILE at byte N", "SHARD member NAME"), for messages.
  virtual std::string locate(int64_t index) const = 0;
  /// Samples left out while opening under skip_bad_samples.
  const SkipReport& open_skips() const { return open_skips_; }

 protected:
  SkipReport open_skips_;
};

struct DatasetOptions {
  /// Skip (and count) bad samples instead of stopping at the first one.
  bool skip_bad_samples = false;
  /// "train", "test" or "val". "test": which IDX / CIFAR files a folder spec reads (images: and
  /// wds: have none: UsageError). "val": the samples `val_fraction` holds out (images:, wds:).
  std::string split = "train";
  /// images: and wds: only, in [0, 1): the share of samples held out of "train" for "val", chosen
  /// by a hash of each sample's key (not by the seed or the listing order). 0: nothing held out.
  /// Other formats refuse a non-zero value (UsageError naming --val-fraction).
  double val_fraction = 0;
  /// synthetic: the sample shape, class count and sample count.
  SampleShape synthetic_shape{1, 28, 28};
  int64_t synthetic_classes = 10;
  int64_t synthetic_size = 4096;
  uint64_t seed = 0;
  /// Where `fashion-mnist` is looked for (Debian's dataset-fashion-mnist).
  std::string fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";
  /// The bound on what images: and wds: hold from their opening on (an image folder's table of
  /// paths, a shard set's encoded images): a CPU run's memory budget; 0: none (a GPU run).
  int64_t held_budget_bytes = 0;
};

/// Whether `spec` is a format whose samples `val_fraction` can hold out (images:, wds:).
bool can_hold_out(const std::string& spec);

/// The held-out ("val") samples among `keys` (one per sample, e.g. a relative path): the
/// round(fraction x n) keys of smallest 64-bit hash (FNV-1a, mixed), every key equal to the last
/// of them included, so the choice depends on the keys only, never on their order, the seed or the
/// process. Result[i] is true when sample i is held out. Throws UsageError naming --val-fraction
/// and `spec` for a fraction outside [0, 1) or a split that leaves no training or no val sample.
std::vector<bool> held_out_keys(const std::vector<std::string>& keys, double fraction, const std::string& spec);

/// Opens `spec` (see the list above). Throws UsageError for an unknown spec or a missing path,
/// DataError for bad data met while opening.
std::unique_ptr<Dataset> open_dataset(const std::string& spec, const DatasetOptions& options);

// One small file per format (src/data/*.cpp).
std::unique_ptr<Dataset> open_idx(const std::string& images_file, const std::string& labels_file,
                                  const DatasetOptions& o);
/// `dir` holding IDX files: the `split` pair ("train-images-idx3-ubyte[.gz]", ...), else the only pair.
std::unique_ptr<Dataset> open_idx_dir(const std::string& dir, const DatasetOptions& o);
/// `variant` 10 or 100.
std::unique_ptr<Dataset> open_cifar(const std::string& dir, int variant, const DatasetOptions& o);
std::unique_ptr<Dataset> open_image_folder(const std::string& dir, const DatasetOptions& o);
/// `pattern`: a folder (its *.tar, *.tar.gz shards) or a glob.
std::unique_ptr<Dataset> open_webdataset(const std::string& pattern, const DatasetOptions& o);
std::unique_ptr<Dataset> open_synthetic(const DatasetOptions& o);

}  // namespace saturate

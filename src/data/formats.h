// Implements (private): the parsers behind the datasets, on memory buffers, so that the fuzz
// target (tests/data/fuzz) drives exactly the code the datasets run. No LibTorch here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/data/data_error.h"
#include "saturate/data/dataset.h"

namespace saturate::data {

// ---- files (file_io.cpp)
/// The whole file; gunzipped when it starts with the gzip magic. A truncated gzip stream gives
/// what could be inflated and sets `*truncated` (throws when `truncated` is null).
std::vector<uint8_t> read_file(const std::string& path, bool* truncated = nullptr);
/// Inflates a gzip buffer (name for messages).
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& name, bool* truncated);
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
/// Entries of `dir` (names, sorted); throws DataError when it cannot be listed.
std::vector<std::string> list_dir(const std::string& dir);
std::string join_path(const std::string& dir, const std::string& name);
std::string lower(std::string s);
bool ends_with(const std::string& s, const std::string& suffix);

// ---- the val split of images: and wds: (dataset.cpp)
/// Which samples (one key each) the split `o.split` of `spec` keeps: all of them without
/// `o.val_fraction`; else "train" keeps those held_out_keys does not hold out, "val" exactly those.
/// Throws UsageError for the "test" split (these formats have none) or an impossible fraction.
/// What a dataset keeps in memory from its opening on beside the tensors the budget counts (an
/// image folder's table of paths; a WebDataset shard set's encoded images, read whole), counted
/// as it grows and held to a CPU run's memory budget (none: no bound):
/// past it, a UsageError naming the dataset, how many items it held, what they are and the budget.
class HeldBytes {
 public:
  /// `dataset`: "images:DIR"; `items`: "images"; `what`: "their paths and labels";
  /// `budget_bytes`: DatasetOptions::held_budget_bytes (0: no bound).
  HeldBytes(std::string dataset, std::string items, std::string what, int64_t budget_bytes);
  /// One more item holding `bytes`.
  void add(int64_t bytes);
  /// Before `path` is read whole: its size on disk beside what is held already must fit.
  void will_read(const std::string& path) const;
  int64_t bytes() const { return bytes_; }

 private:
  std::string dataset_, items_, what_;
  int64_t budget_bytes_ = 0;
  int64_t bytes_ = 0;
  int64_t count_ = 0;
};

std::vector<bool> keep_for_split(const std::vector<std::string>& keys, const DatasetOptions& o, const std::string& spec);
/// " (train, val-fraction 0.25)" / " (val, ...)" for a dataset's name; "" without a fraction.
std::string split_suffix(const DatasetOptions& o);

// ---- IDX (idx.cpp)
struct IdxHeader {
  std::vector<int64_t> dims;     ///< dims[0] is the item count
  int64_t data_offset = 0;       ///< first data byte
  int64_t item_bytes = 0;        ///< product of dims[1:]
  int64_t complete_items = 0;    ///< items wholly inside the buffer (< dims[0] when truncated)
};
/// Parses and checks an IDX header (magic 0x0000 08 NDIM: unsigned bytes only). Throws DataError
/// for a bad magic, an unsupported type or implausible dimensions; a short body is not an error
/// here (see complete_items).
IdxHeader parse_idx(const uint8_t* data, size_t size, const std::string& file);

// ---- CIFAR (cifar.cpp)
struct CifarRecords {
  std::vector<int64_t> offsets;  ///< first byte of each good record
  std::vector<int64_t> labels;
};
/// Splits a CIFAR-10 (3073-byte records: label, 3072 pixels) or CIFAR-100 (3074 bytes: coarse,
/// fine label, pixels) batch file. Bad labels and a short last record throw DataError, or are
/// counted in `skips` when it is not null.
CifarRecords parse_cifar(const uint8_t* data, size_t size, int variant, const std::string& file, SkipReport* skips);
constexpr int64_t kCifarPixels = 3 * 32 * 32;

// ---- WebDataset tar shards (webdataset.cpp)
struct WdsSample {
  std::string key;             ///< member path up to the first dot of its base name
  std::string image_member;    ///< e.g. "000012.jpg"
  int64_t image_offset = -1;   ///< byte offset of the image member's header in the shard
  std::vector<uint8_t> image;  ///< the encoded image
  int64_t label = -1;
};
/// Reads one shard (plain or gzipped tar) from memory and groups members by key. Damaged
/// members and samples without an image or a label throw DataError, or are counted in `skips`.
std::vector<WdsSample> read_wds_shard(const uint8_t* data, size_t size, const std::string& shard, SkipReport* skips);
/// An integer label from a .cls / .txt member ("7\n"); -1 when it is not one.
int64_t parse_label_text(const uint8_t* data, size_t size);

// ---- images (image_decode.cpp)
enum class ImageFormat { kUnknown, kJpeg, kPng };
ImageFormat sniff_image(const uint8_t* data, size_t size);
/// Reads only the header: shape as stored. Throws DataError (file) for an undecodable header.
SampleShape image_shape(const uint8_t* data, size_t size, const std::string& file);
/// Decodes a JPEG or PNG into 8-bit HWC; `channels` 1 or 3 asks for grey or RGB (0: as stored,
/// alpha dropped). Throws DataError naming `file` for anything undecodable, truncated included.
void decode_image(const uint8_t* data, size_t size, int64_t channels, const std::string& file, Image& out);
/// Largest side accepted (guards against absurd headers).
constexpr int64_t kMaxImageSide = 16384;
/// The most one decoded image may take: 256 MiB (9000 x 9000 RGB), and no more than 1/8 of the
/// CPU budget when one is set (the loader's workers decode several at once; the loader tells
/// the budget with set_image_memory_budget, so that the parsers need no LibTorch).
int64_t max_decoded_image_bytes();
void set_image_memory_budget(int64_t budget_bytes);
/// "64.0 MiB".
std::string mib_text(int64_t bytes);
/// Throws DataError naming `file` when a `format` image of h x w x c decodes to more than
/// max_decoded_image_bytes(); checked on the header, before any pixel is decoded.
void check_decoded_size(const std::string& file, const char* format, int64_t h, int64_t w, int64_t c);

}  // namespace saturate::data

// Implements: CIFAR-10 / CIFAR-100 binary batches. A record is the label byte(s) then 3072
// pixel bytes, planar (1024 red, 1024 green, 1024 blue), rows of 32. CIFAR-10 train files are
// data_batch_1..5.bin and test_batch.bin; CIFAR-100's are train.bin and test.bin.
#include <algorithm>

#include "formats.h"

namespace saturate::data {

CifarRecords parse_cifar(const uint8_t* data, size_t size, int variant, const std::string& file, SkipReport* skips) {
  const int64_t label_bytes = variant == 100 ? 2 : 1;
  const int64_t record = label_bytes + kCifarPixels;
  const int64_t classes = variant == 100 ? 100 : 10;
  const auto n = static_cast<int64_t>(size);
  CifarRecords r;
  if (n == 0) throw DataError(file, 0, "empty file: no CIFAR records");
  for (int64_t at = 0; at < n; at += record) {
    if (at + record > n) {
      DataError e(file, at, "short CIFAR-" + std::to_string(variant) + " record: " + std::to_string(n - at) + " of " +
                                std::to_string(record) + " bytes (the file size " + std::to_string(n) +
                                " is not a multiple of the record size; truncated?)");
      if (!skips) throw e;
      skips->add(e.what());
      break;
    }
    const int64_t label = data[at + label_bytes - 1];  // CIFAR-100: the fine label
    if (label >= classes) {
      DataError e(file, at + label_bytes - 1,
                  "label " + std::to_string(label) + " of record " + std::to_string(at / record) +
                      " is out of range [0, " + std::to_string(classes) + "); is this a CIFAR-" +
                      (variant == 100 ? "10" : "100") + " file?");
      if (!skips) throw e;
      skips->add(e.what());
      continue;
    }
    r.offsets.push_back(at + label_bytes);
    r.labels.push_back(label);
  }
  return r;
}

namespace {

class CifarDataset final : public Dataset {
 public:
  CifarDataset(const std::string& dir, int variant, const DatasetOptions& o) : variant_(variant) {
    if (!is_directory(dir)) throw UsageError("`data` cifar" + std::to_string(variant) + ":" + dir + ": no such folder");
    std::vector<std::string> chosen, any;
    for (const auto& n : list_dir(dir)) {
      if (!ends_with(lower(n), ".bin")) continue;
      any.push_back(n);
      const bool test = n.find("test") != std::string::npos;
      if ((o.split == "test") == test) chosen.push_back(n);
    }
    if (chosen.empty()) chosen = any;
    if (chosen.empty())
      throw UsageError("`data` cifar" + std::to_string(variant) + ":" + dir +
                       ": no CIFAR batch files (*.bin; e.g. data_batch_1.bin) in the folder");
    for (const auto& n : chosen) {
      const std::string path = join_path(dir, n);
      File f;
      f.path = path;
      try {
        f.bytes = read_file(path);
        CifarRecords r = parse_cifar(f.bytes.data(), f.bytes.size(), variant, path,
                                     o.skip_bad_samples ? &open_skips_ : nullptr);
        for (size_t i = 0; i < r.offsets.size(); ++i)
          samples_.push_back({static_cast<int32_t>(files_.size()), r.offsets[i], r.labels[i]});
      } catch (const DataError& e) {
        if (!o.skip_bad_samples) throw;
        open_skips_.add(std::string(e.what()) + " (file skipped)", 0);
        continue;
      }
      files_.push_back(std::move(f));
    }
    if (samples_.empty()) throw DataError(dir, -1, "no usable CIFAR records");
    name_ = "cifar" + std::to_string(variant) + ":" + dir;
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t classes() const override { return variant_ == 100 ? 100 : 10; }
  SampleShape shape() const override { return {3, 32, 32}; }

  int64_t get(int64_t index, int64_t, Image& out) const override {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    const uint8_t* src = files_[static_cast<size_t>(s.file)].bytes.data() + s.offset;
    out.resize(32, 32, 3);
    uint8_t* dst = out.pixels.data();
    for (int64_t p = 0; p < 1024; ++p) {  // planar -> interleaved
      dst[3 * p] = src[p];
      dst[3 * p + 1] = src[1024 + p];
      dst[3 * p + 2] = src[2048 + p];
    }
    return s.label;
  }

  std::string locate(int64_t index) const override {
    const Sample& s = samples_.at(static_cast<size_t>(index));
    return files_[static_cast<size_t>(s.file)].path + " at byte " + std::to_string(s.offset);
  }

 private:
  struct File {
    std::string path;
    std::vector<uint8_t> bytes;
  };
  struct Sample {
    int32_t file;
    int64_t offset;
    int64_t label;
  };
  int variant_;
  std::string name_;
  std::vector<File> files_;
  std::vector<Sample> samples_;
};

}  // namespace
}  // namespace saturate::data

namespace saturate {

std::unique_ptr<Dataset> open_cifar(const std::string& dir, int variant, const DatasetOptions& o) {
  return std::make_unique<data::CifarDataset>(dir, variant, o);
}

}  // namespace saturate

// Implements: WebDataset-style tar shards read with libarchive. Members are grouped into
// samples by key (the path up to the first dot of the base name: "a/0001.jpg" and "a/0001.cls"
// make sample "a/0001"); the image is the .jpg/.jpeg/.png member, the label the integer in .cls
// (or in .txt when there is no .cls). Shards are read whole at open (fine for benchmark-sized
// sets; a streaming reader is the follow-up for shards larger than memory). With
// DatasetOptions::val_fraction, the split ("train" or "val") keeps its side of the hold-out, keyed
// by each sample's key (WebDataset keys name a sample across the whole set, whichever shard).
#include <glob.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>

#include <archive.h>
#include <archive_entry.h>

#include "formats.h"

namespace saturate::data {

int64_t parse_label_text(const uint8_t* data, size_t size) {
  size_t b = 0, e = size;
  while (b < e && std::isspace(data[b])) ++b;
  while (e > b && std::isspace(data[e - 1])) --e;
  if (b == e || e - b > 9) return -1;
  int64_t v = 0;
  for (size_t i = b; i < e; ++i) {
    if (data[i] < '0' || data[i] > '9') return -1;
    v = v * 10 + (data[i] - '0');
  }
  return v;
}

namespace {

struct Pending {
  WdsSample sample;
  int64_t cls = -1, txt = -1;
  bool has_cls = false;
  bool broken = false;
};

std::string member_key(const std::string& path, std::string* ext) {
  const size_t slash = path.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find('.', base);
  if (dot == std::string::npos) {
    *ext = "";
    return path;
  }
  *ext = lower(path.substr(dot + 1));
  return path.substr(0, dot);
}

std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "no message";
}

/// The most one member of a sample may hold (an image, a label, an array).
constexpr int64_t kMaxMemberBytes = int64_t{256} << 20;

struct ArchiveCloser {
  archive* a;
  ~ArchiveCloser() { archive_read_free(a); }
};

/// The current member's bytes, and why it is broken (empty: it is whole). `unpacked` counts the
/// shard's bytes unpacked so far, bounded by `most_unpacked` against a decompression bomb.
std::pair<std::vector<uint8_t>, std::string> read_member(archive* a, int64_t declared, int64_t& unpacked,
                                                         int64_t most_unpacked, size_t shard_size) {
  std::vector<uint8_t> bytes;
  bytes.reserve(declared > 0 ? static_cast<size_t>(declared) : 0);
  uint8_t buf[16384];
  while (true) {
    const la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) return {std::move(bytes), archive_message(a)};
    bytes.insert(bytes.end(), buf, buf + n);
    unpacked += n;
    if (static_cast<int64_t>(bytes.size()) > kMaxMemberBytes)  // a bomb: stopped before it takes the memory
      return {std::move(bytes),
              "it unpacks to more than " + mib_text(kMaxMemberBytes) + ", what a sample's member may take"};
    if (unpacked > most_unpacked)
      return {std::move(bytes), "the shard unpacks to more than " + mib_text(most_unpacked) + " (16 x its " +
                                    mib_text(static_cast<int64_t>(shard_size)) +
                                    " on disk, at least 64 MiB): a decompression bomb, not samples"};
  }
  if (declared >= 0 && static_cast<int64_t>(bytes.size()) != declared)
    return {std::move(bytes),
            "member holds " + std::to_string(bytes.size()) + " of its " + std::to_string(declared) + " bytes"};
  return {std::move(bytes), ""};
}

/// The samples whose members all arrived, in the shard's order: an image and an integer label
/// each (a sample without is reported through `fail`; a broken one was reported when it was met).
std::vector<WdsSample> complete_samples(const std::vector<std::string>& order, std::map<std::string, Pending>& open,
                                        const std::function<void(int64_t, const std::string&)>& fail) {
  std::vector<WdsSample> out;
  for (const auto& key : order) {
    Pending& p = open[key];
    if (p.broken) continue;
    p.sample.label = p.has_cls ? p.cls : p.txt;
    if (p.sample.image.empty()) {
      fail(-1, "sample '" + key + "' has no .jpg/.jpeg/.png member");
      continue;
    }
    if (p.sample.label < 0) {
      fail(p.sample.image_offset, "sample '" + key + "' has no integer label (.cls, or .txt holding an integer)");
      continue;
    }
    out.push_back(std::move(p.sample));
  }
  return out;
}

}  // namespace

std::vector<WdsSample> read_wds_shard(const uint8_t* data, size_t size, const std::string& shard, SkipReport* skips) {
  archive* a = archive_read_new();
  ArchiveCloser closer{a};
  archive_read_support_format_tar(a);
  archive_read_support_filter_gzip(a);
  if (archive_read_open_memory(a, data, size) != ARCHIVE_OK)
    throw DataError(shard, 0, "not a tar shard (libarchive: " + archive_message(a) + ")");
  std::map<std::string, Pending> open;  // samples whose members are still arriving, in key order
  std::vector<std::string> order;
  const auto fail = [&](int64_t at, const std::string& problem) {
    DataError e(shard, at, problem);
    if (!skips) throw e;
    skips->add(e.what());
  };
  bool damaged = false;
  int64_t unpacked = 0;  // bytes of members read so far, bounded against a decompression bomb
  const int64_t most_unpacked = std::max<int64_t>(int64_t{64} << 20, 16 * static_cast<int64_t>(size));
  while (true) {
    archive_entry* entry = nullptr;
    const int64_t before = archive_filter_bytes(a, 0);
    const int rc = archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    // tar headers start on 512-byte blocks: the damaged one is the next block boundary.
    const int64_t header_guess = (std::max<int64_t>(before, 0) + 511) / 512 * 512;
    if (rc == ARCHIVE_RETRY) {  // libarchive skipped a damaged header and can go on
      fail(header_guess, "broken tar header skipped (libarchive: " + archive_message(a) + ")");
      continue;
    }
    if (rc < ARCHIVE_WARN) {
      fail(header_guess, "broken tar header (libarchive: " + archive_message(a) +
                             "); the rest of the shard is unreadable");
      damaged = true;
      break;
    }
    const int64_t header_at = archive_read_header_position(a);
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    const char* raw_name = archive_entry_pathname(entry);
    const std::string name = raw_name ? raw_name : "";
    std::string ext;
    const std::string key = member_key(name, &ext);
    const int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
    if (declared > kMaxMemberBytes) {
      fail(header_at, "member '" + name + "' declares " + mib_text(declared) + ", more than a sample's member may "
                      "take (" + mib_text(kMaxMemberBytes) + "); not a sample");
      damaged = true;
      break;
    }
    auto [bytes, why] = read_member(a, declared, unpacked, most_unpacked, size);
    const bool broken = !why.empty();
    auto [it, inserted] = open.try_emplace(key);
    if (inserted) order.push_back(key);
    Pending& p = it->second;
    p.sample.key = key;
    if (broken) {
      p.broken = true;
      fail(header_at, "broken tar member '" + name + "' (" + why + ")");
      damaged = true;
      break;  // libarchive cannot resynchronise after a damaged member
    }
    if (ext == "jpg" || ext == "jpeg" || ext == "png") {
      p.sample.image = std::move(bytes);
      p.sample.image_member = name;
      p.sample.image_offset = header_at;
    } else if (ext == "cls") {
      p.cls = parse_label_text(bytes.data(), bytes.size());
      p.has_cls = true;
    } else if (ext == "txt") {
      p.txt = parse_label_text(bytes.data(), bytes.size());
    }
  }
  (void)damaged;
  return complete_samples(order, open, fail);
}

namespace {

class WdsDataset final : public Dataset {
 public:
  WdsDataset(const std::string& pattern, const DatasetOptions& o) {
    std::vector<std::string> shards;
    if (is_directory(pattern)) {
      for (const auto& n : list_dir(pattern)) {
        const std::string l = lower(n);
        if (ends_with(l, ".tar") || ends_with(l, ".tar.gz") || ends_with(l, ".tgz")) shards.push_back(join_path(pattern, n));
      }
    } else {
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) shards.emplace_back(g.gl_pathv[i]);
      globfree(&g);
      std::sort(shards.begin(), shards.end());
    }
    if (shards.empty())
      throw UsageError("`data` wds:" + pattern + ": no tar shards (a folder of *.tar, or a glob such as 'dir/shard-*.tar')");
    SkipReport* skips = o.skip_bad_samples ? &open_skips_ : nullptr;
    // every sample's encoded image is held from here on: bounded by the budget, shard by shard
    HeldBytes held("wds:" + pattern, "samples", "their encoded images and keys, read whole from the shards",
                   o.held_budget_bytes);
    for (const auto& s : shards) {
      std::vector<WdsSample> got;
      try {
        held.will_read(s);
        const std::vector<uint8_t> bytes = read_file(s);
        got = read_wds_shard(bytes.data(), bytes.size(), s, skips);
      } catch (const DataError& e) {
        if (!skips) throw;
        open_skips_.add(std::string(e.what()) + " (shard skipped)", 0);
        continue;
      }
      for (auto& g : got) {
        held.add(static_cast<int64_t>(sizeof(Entry) + g.image.size() + g.key.size() + g.image_member.size()));
        classes_ = std::max(classes_, g.label + 1);
        samples_.push_back({static_cast<int32_t>(shards_.size()), std::move(g)});
      }
      shards_.push_back(s);
    }
    if (samples_.empty()) throw DataError(pattern, -1, "no usable samples in " + std::to_string(shards.size()) + " shard(s)");
    if (o.val_fraction > 0 || o.split != "train") {  // classes_ stays that of every split together
      std::vector<std::string> keys;
      keys.reserve(samples_.size());
      for (const auto& e : samples_) keys.push_back(e.sample.key);
      const std::vector<bool> keep = keep_for_split(keys, o, "wds:" + pattern);
      std::vector<Entry> kept;
      for (size_t i = 0; i < samples_.size(); ++i)
        if (keep[i]) kept.push_back(std::move(samples_[i]));
      samples_ = std::move(kept);
    }
    // the first sample that decodes gives the shape (skip mode: bad ones are met again later).
    for (size_t i = 0; i < samples_.size() && shape_.empty(); ++i) {
      try {
        const auto& img = samples_[i].sample.image;
        shape_ = image_shape(img.data(), img.size(), locate(static_cast<int64_t>(i)));
      } catch (const DataError&) {
        if (!skips) throw;
      }
    }
    if (shape_.empty()) throw DataError(pattern, -1, "no image in the shards could be decoded");
    name_ = "wds:" + pattern + split_suffix(o);
  }

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  int64_t classes() const override { return classes_; }
  SampleShape shape() const override { return shape_; }

  int64_t get(int64_t index, int64_t channels, Image& out) const override {
    const Entry& e = samples_.at(static_cast<size_t>(index));
    decode_image(e.sample.image.data(), e.sample.image.size(), channels, locate(index), out);
    return e.sample.label;
  }

  std::string locate(int64_t index) const override {
    const Entry& e = samples_.at(static_cast<size_t>(index));
    return shards_[static_cast<size_t>(e.shard)] + " member '" + e.sample.image_member + "' (header at byte " +
           std::to_string(e.sample.image_offset) + ")";
  }

 private:
  struct Entry {
    int32_t shard;
    WdsSample sample;
  };
  std::string name_;
  std::vector<std::string> shards_;
  std::vector<Entry> samples_;
  int64_t classes_ = 0;
  SampleShape shape_;
};

}  // namespace
}  // namespace saturate::data

namespace saturate {

std::unique_ptr<Dataset> open_webdataset(const std::string& pattern, const DatasetOptions& o) {
  return std::make_unique<data::WdsDataset>(pattern, o);
}

}  // namespace saturate

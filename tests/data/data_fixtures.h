// Test fixtures for the data tests: write small files of every format (IDX, CIFAR, PNG, JPEG,
// tar shards, gzip) with known contents, and stub datasets. Header-only: one per data test.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <archive.h>
#include <archive_entry.h>
#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "saturate/data/dataset.h"

namespace saturate::testing {

using Bytes = std::vector<uint8_t>;

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

inline void append_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

/// A recognisable pixel value for sample i, row y, column x, channel c.
inline uint8_t pixel(int64_t i, int64_t y, int64_t x, int64_t c = 0) {
  return static_cast<uint8_t>((i * 37 + y * 11 + x * 5 + c * 71) & 0xff);
}

inline Bytes idx_images(int64_t n, int64_t rows, int64_t cols) {
  Bytes b{0, 0, 8, 3};
  append_be32(b, static_cast<uint32_t>(n));
  append_be32(b, static_cast<uint32_t>(rows));
  append_be32(b, static_cast<uint32_t>(cols));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < rows; ++y)
      for (int64_t x = 0; x < cols; ++x) b.push_back(pixel(i, y, x));
  return b;
}

inline Bytes idx_labels(const std::vector<uint8_t>& labels) {
  Bytes b{0, 0, 8, 1};
  append_be32(b, static_cast<uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

inline Bytes gzip_bytes(const Bytes& in) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// CIFAR records: planar pixels pixel(i, y, x, c); CIFAR-100 gets coarse label 0.
inline Bytes cifar_records(int variant, const std::vector<uint8_t>& labels, int64_t first = 0) {
  Bytes b;
  for (size_t k = 0; k < labels.size(); ++k) {
    if (variant == 100) b.push_back(0);
    b.push_back(labels[k]);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) b.push_back(pixel(first + static_cast<int64_t>(k), y, x, c));
  }
  return b;
}

inline Image pattern_image(int64_t h, int64_t w, int64_t c, int64_t seed) {
  Image img;
  img.resize(h, w, c);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) img.pixels[static_cast<size_t>((y * w + x) * c + k)] = pixel(seed, y, x, k);
  return img;
}

/// Smooth content, so that a JPEG round trip stays close.
inline Image smooth_image(int64_t h, int64_t w, int64_t c, int64_t seed) {
  Image img;
  img.resize(h, w, c);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k)
        img.pixels[static_cast<size_t>((y * w + x) * c + k)] =
            static_cast<uint8_t>(30 + seed + 2 * y + 2 * x + 20 * k);  // up to 32x32: no wrap
  return img;
}

inline Bytes encode_png(const Image& img) {
  png_image p;
  std::memset(&p, 0, sizeof p);
  p.version = PNG_IMAGE_VERSION;
  p.width = static_cast<png_uint_32>(img.width);
  p.height = static_cast<png_uint_32>(img.height);
  p.format = img.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t n = 0;
  png_image_write_to_memory(&p, nullptr, &n, 0, img.pixels.data(), 0, nullptr);
  Bytes out(n);
  png_image_write_to_memory(&p, out.data(), &n, 0, img.pixels.data(), 0, nullptr);
  out.resize(n);
  return out;
}

inline Bytes encode_jpeg(const Image& img, int quality = 95) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = static_cast<JDIMENSION>(img.width);
  c.image_height = static_cast<JDIMENSION>(img.height);
  c.input_components = static_cast<int>(img.channels);
  c.in_color_space = img.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.pixels.data()) + c.next_scanline * img.width * img.channels;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(mem, mem + size);
  std::free(mem);
  return out;
}

/// A ustar archive of (name, bytes) members in order; gzipped when asked.
inline Bytes make_tar(const std::vector<std::pair<std::string, Bytes>>& members, bool gzip = false) {
  archive* a = archive_write_new();
  archive_write_set_format_ustar(a);
  if (gzip) archive_write_add_filter_gzip(a);
  size_t cap = 1 << 16;
  for (const auto& m : members) cap += m.second.size() + 1024;
  Bytes buf(cap);
  size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  buf.resize(used);
  return buf;
}

inline Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

/// A dataset of n tiny samples whose pixels encode the index; optional failure and delay.
class StubDataset final : public Dataset {
 public:
  StubDataset(int64_t n, int64_t classes = 10, SampleShape shape = {1, 4, 4}) : n_(n), classes_(classes), shape_(shape) {}
  std::function<void(int64_t)> on_get;  // may throw or sleep
  std::string name() const override { return "stub"; }
  int64_t size() const override { return n_; }
  int64_t classes() const override { return classes_; }
  SampleShape shape() const override { return shape_; }
  int64_t get(int64_t index, int64_t, Image& out) const override {
    if (on_get) on_get(index);
    out.resize(shape_.height, shape_.width, shape_.channels);
    for (size_t k = 0; k < out.pixels.size(); ++k) out.pixels[k] = static_cast<uint8_t>((index * 7 + static_cast<int64_t>(k)) & 0xff);
    return label_of ? label_of(index) : index % classes_;
  }
  std::function<int64_t(int64_t)> label_of;
  std::string locate(int64_t index) const override { return "stub-file-" + std::to_string(index); }

 private:
  int64_t n_, classes_;
  SampleShape shape_;
};

}  // namespace saturate::testing

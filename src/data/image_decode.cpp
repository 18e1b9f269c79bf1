// Implements: JPEG (libjpeg-turbo) and PNG (libpng's simplified API) decoding into 8-bit HWC.
// libjpeg reports errors through a callback that must not return: it longjmps back here, and
// only plain C data lives between setjmp and longjmp. Warnings (a truncated or corrupt stream
// that libjpeg would patch with grey) are errors too: never a silently wrong sample.
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include <jpeglib.h>
#include <png.h>

#include "formats.h"

#include <algorithm>
#include <atomic>

namespace saturate::data {
namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void jpeg_warn(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);  // -1: a warning (corrupt data); >= 0: trace messages
}

/// 0 on success, else the error text is in err.message. `out` is malloc'd; caller frees.
int decode_jpeg_c(const uint8_t* data, size_t size, int want, bool header_only, uint8_t** out, int* h, int* w,
                  int* c, JpegError* err) {
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof cinfo);
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_fail;
  err->mgr.emit_message = jpeg_warn;
  err->message[0] = 0;
  *out = nullptr;
  uint8_t* volatile buffer = nullptr;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::free(buffer);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.image_width < 1 || cinfo.image_height < 1 || cinfo.image_width > kMaxImageSide ||
      cinfo.image_height > kMaxImageSide) {
    std::snprintf(err->message, sizeof err->message, "implausible JPEG size %ux%u", cinfo.image_width,
                  cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  const int stored = cinfo.num_components == 1 ? 1 : 3;
  const int channels = want == 1 || want == 3 ? want : stored;
  *h = static_cast<int>(cinfo.image_height);
  *w = static_cast<int>(cinfo.image_width);
  *c = channels;
  if (header_only) {
    jpeg_destroy_decompress(&cinfo);
    return 0;
  }
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const size_t stride = static_cast<size_t>(cinfo.output_width) * static_cast<size_t>(cinfo.output_components);
  buffer = static_cast<uint8_t*>(std::malloc(stride * cinfo.output_height));
  if (!buffer) {
    std::snprintf(err->message, sizeof err->message, "out of memory");
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = buffer + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  *out = buffer;
  return 0;
}

void decode_jpeg(const uint8_t* data, size_t size, int64_t want, const std::string& file, Image* out,
                 SampleShape* shape) {
  JpegError err;
  uint8_t* pixels = nullptr;
  int h = 0, w = 0, c = 0;
  if (out) {  // the header first: no pixel is decoded for an image too large to hold
    if (decode_jpeg_c(data, size, static_cast<int>(want), 1, &pixels, &h, &w, &c, &err) != 0)
      throw DataError(file, -1, std::string("undecodable JPEG: ") + err.message);
    check_decoded_size(file, "JPEG", h, w, c);
  }
  if (decode_jpeg_c(data, size, static_cast<int>(want), out == nullptr, &pixels, &h, &w, &c, &err) != 0)
    throw DataError(file, -1, std::string("undecodable JPEG: ") + err.message);
  if (shape) *shape = {c, h, w};
  if (out) {
    out->resize(h, w, c);
    std::memcpy(out->pixels.data(), pixels, out->pixels.size());
    std::free(pixels);
  }
}

void decode_png(const uint8_t* data, size_t size, int64_t want, const std::string& file, Image* out,
                SampleShape* shape) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, data, size))
    throw DataError(file, -1, std::string("undecodable PNG: ") + img.message);
  if (img.width < 1 || img.height < 1 || img.width > kMaxImageSide || img.height > kMaxImageSide) {
    png_image_free(&img);
    throw DataError(file, -1, "implausible PNG size " + std::to_string(img.width) + "x" + std::to_string(img.height));
  }
  const int stored = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  const int channels = want == 1 || want == 3 ? static_cast<int>(want) : stored;
  if (shape) *shape = {channels, img.height, img.width};
  if (!out) {
    png_image_free(&img);
    return;
  }
  try {
    check_decoded_size(file, "PNG", img.height, img.width, channels);
  } catch (...) {
    png_image_free(&img);
    throw;
  }
  img.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;  // alpha composited away
  out->resize(img.height, img.width, channels);
  if (!png_image_finish_read(&img, nullptr, out->pixels.data(), 0, nullptr))
    throw DataError(file, -1, std::string("undecodable PNG: ") + img.message);
}

}  // namespace

namespace {
std::atomic<int64_t> g_image_budget{0};
}  // namespace

void set_image_memory_budget(int64_t budget_bytes) { g_image_budget = budget_bytes; }

int64_t max_decoded_image_bytes() {
  const int64_t most = int64_t{256} << 20;
  const int64_t budget = g_image_budget.load();
  return budget > 0 ? std::min(most, budget / 8) : most;
}

void check_decoded_size(const std::string& file, const char* format, int64_t h, int64_t w, int64_t c) {
  const int64_t bytes = h * w * c;
  const int64_t most = max_decoded_image_bytes();
  if (bytes > most)
    throw DataError(file, -1,
                    std::string("the ") + format + " is " + std::to_string(h) + "x" + std::to_string(w) + "x" +
                        std::to_string(c) + ": decoded it takes " + mib_text(bytes) + ", more than one image may (" +
                        mib_text(most) + ": at most 256 MiB and 1/8 of the CPU memory budget); shrink the image or "
                        "give a larger budget");
}

ImageFormat sniff_image(const uint8_t* data, size_t size) {
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return ImageFormat::kJpeg;
  static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, png_magic, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

SampleShape image_shape(const uint8_t* data, size_t size, const std::string& file) {
  SampleShape s;
  switch (sniff_image(data, size)) {
    case ImageFormat::kJpeg: decode_jpeg(data, size, 0, file, nullptr, &s); break;
    case ImageFormat::kPng: decode_png(data, size, 0, file, nullptr, &s); break;
    default: throw DataError(file, 0, "neither a JPEG nor a PNG (unknown magic bytes)");
  }
  return s;
}

void decode_image(const uint8_t* data, size_t size, int64_t channels, const std::string& file, Image& out) {
  switch (sniff_image(data, size)) {
    case ImageFormat::kJpeg: decode_jpeg(data, size, channels, file, &out, nullptr); break;
    case ImageFormat::kPng: decode_png(data, size, channels, file, &out, nullptr); break;
    default: throw DataError(file, 0, "neither a JPEG nor a PNG (unknown magic bytes)");
  }
}

}  // namespace saturate::data

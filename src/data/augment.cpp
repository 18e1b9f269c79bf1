#include "saturate/data/augment.h"

#include <algorithm>

#include "saturate/core/errors.h"
#include "saturate/data/sampler.h"

namespace saturate {
namespace {

void resize_nearest(const Image& in, int64_t h, int64_t w, Image& out) {
  out.resize(h, w, in.channels);
  const int64_t c = in.channels;
  for (int64_t y = 0; y < h; ++y) {
    const int64_t sy = std::min(in.height - 1, (y * in.height) / h);
    const uint8_t* src_row = in.pixels.data() + sy * in.width * c;
    uint8_t* dst = out.pixels.data() + y * w * c;
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sx = std::min(in.width - 1, (x * in.width) / w);
      std::copy(src_row + sx * c, src_row + sx * c + c, dst + x * c);
    }
  }
}

}  // namespace

void augment_into(const Image& image, const SampleShape& shape, const AugmentOptions& o, uint64_t rng_seed, float* out) {
  const int64_t C = shape.channels, H = shape.height, W = shape.width;
  const Image* src = &image;
  thread_local Image resized;
  if (image.height != H || image.width != W) {
    resize_nearest(image, H, W, resized);
    src = &resized;
  }
  const int64_t sc = src->channels;
  // one table per output channel: byte -> normalized float.
  thread_local std::vector<float> lut;
  lut.resize(static_cast<size_t>(C) * 256);
  for (int64_t c = 0; c < C; ++c) {
    const float mean = o.mean.empty() ? 0.f : o.mean[static_cast<size_t>(c) % o.mean.size()];
    const float sd = o.std.empty() ? 1.f : o.std[static_cast<size_t>(c) % o.std.size()];
    if (sd == 0.f) throw UsageError("normalize: std 0 for channel " + std::to_string(c));
    for (int v = 0; v < 256; ++v) lut[static_cast<size_t>(c * 256 + v)] = (static_cast<float>(v) / 255.f - mean) / sd;
  }
  uint64_t r = mix64(rng_seed);
  const int64_t pad = std::max<int64_t>(0, o.crop_padding);
  int64_t oy = 0, ox = 0;
  if (pad > 0) {
    oy = static_cast<int64_t>(r % static_cast<uint64_t>(2 * pad + 1));
    r = mix64(r);
    ox = static_cast<int64_t>(r % static_cast<uint64_t>(2 * pad + 1));
    r = mix64(r);
  }
  const bool flip = o.horizontal_flip && (mix64(r) & 1);
  const bool grey_from_colour = C == 1 && sc >= 3;
  const uint8_t* px = src->pixels.data();
  for (int64_t c = 0; c < C; ++c) {
    const float* t = lut.data() + c * 256;
    const int64_t ch = sc == C ? c : (sc == 1 ? 0 : c % std::min<int64_t>(sc, 3));
    for (int64_t y = 0; y < H; ++y) {
      float* row = out + (c * H + y) * W;
      const int64_t sy = y + oy - pad;
      if (sy < 0 || sy >= H) {
        std::fill(row, row + W, t[0]);
        continue;
      }
      const uint8_t* src_row = px + sy * W * sc;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = (flip ? W - 1 - x : x) + ox - pad;
        if (sx < 0 || sx >= W) {
          row[x] = t[0];
        } else if (grey_from_colour) {
          const uint8_t* p = src_row + sx * sc;
          row[x] = t[(299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000];
        } else {
          row[x] = t[src_row[sx * sc + ch]];
        }
      }
    }
  }
}

}  // namespace saturate

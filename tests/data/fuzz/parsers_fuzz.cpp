// Fuzz entry point for the data parsers. The first byte picks the parser; the rest is its input.
// A DataError is the expected answer to bad input; anything else escaping, or a memory error
// found by the sanitizers, is a bug.
#include <cstddef>
#include <cstdint>

#include "formats.h"

using namespace saturate;
using namespace saturate::data;

namespace {

volatile uint64_t g_sink = 0;

void touch(const uint8_t* p, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  g_sink = g_sink + s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t which = data[0] % 6;
  const bool skip = data[1] & 1;
  data += 2;
  size -= 2;
  SkipReport skips;
  try {
    switch (which) {
      case 0: {
        const IdxHeader h = parse_idx(data, size, "fuzz.idx");
        // the dataset reads complete items only: they must lie inside the buffer.
        for (int64_t i = 0; i < h.complete_items && i < 64; ++i) touch(data + h.data_offset + i * h.item_bytes, h.item_bytes);
        break;
      }
      case 1:
      case 2: {
        const CifarRecords r = parse_cifar(data, size, which == 1 ? 10 : 100, "fuzz.bin", skip ? &skips : nullptr);
        for (size_t i = 0; i < r.offsets.size() && i < 16; ++i) touch(data + r.offsets[i], kCifarPixels);
        break;
      }
      case 3: {
        const std::vector<WdsSample> samples = read_wds_shard(data, size, "fuzz.tar", skip ? &skips : nullptr);
        for (const auto& s : samples) {
          Image img;
          try {
            decode_image(s.image.data(), s.image.size(), s.label % 4, s.image_member, img);
          } catch (const DataError&) {
          }
        }
        break;
      }
      case 4: {
        Image img;
        image_shape(data, size, "fuzz.img");
        decode_image(data, size, skip ? 1 : 3, "fuzz.img", img);
        touch(img.pixels.data(), static_cast<int64_t>(img.pixels.size()));
        break;
      }
      case 5: {
        bool truncated = false;
        const std::vector<uint8_t> out = gunzip(data, size, "fuzz.gz", skip ? &truncated : nullptr);
        touch(out.data(), static_cast<int64_t>(out.size()));
        break;
      }
    }
  } catch (const DataError&) {
  }
  return 0;
}

// A plain fuzz driver for compilers without libFuzzer: mutates valid seed inputs (bit flips,
// interesting bytes, truncation, splices, insertions) and feeds them to LLVMFuzzerTestOneInput
// for a bounded time. `--write-seeds DIR` writes the seeds as a libFuzzer corpus instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <archive.h>
#include <archive_entry.h>
#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

void be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

Bytes png_bytes(int w, int h, bool colour) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = w;
  img.height = h;
  img.format = colour ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  Bytes pixels(static_cast<size_t>(w * h * (colour ? 3 : 1)));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  png_alloc_size_t n = 0;
  png_image_write_to_memory(&img, nullptr, &n, 0, pixels.data(), 0, nullptr);
  Bytes out(n);
  png_image_write_to_memory(&img, out.data(), &n, 0, pixels.data(), 0, nullptr);
  out.resize(n);
  return out;
}

Bytes jpeg_bytes(int w, int h) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  Bytes row(static_cast<size_t>(w * 3));
  while (c.next_scanline < c.image_height) {
    for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(i * 5 + c.next_scanline * 11);
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  Bytes out(mem, mem + size);
  std::free(mem);
  return out;
}

Bytes tar_bytes(bool gzip) {
  archive* a = archive_write_new();
  archive_write_set_format_ustar(a);
  if (gzip) archive_write_add_filter_gzip(a);
  Bytes buf(1 << 16);
  size_t used = 0;
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  const auto add = [&](const std::string& name, const Bytes& data) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  };
  add("s/000.jpg", jpeg_bytes(8, 8));
  add("s/000.cls", Bytes{'3', '\n'});
  add("s/001.png", png_bytes(6, 5, false));
  add("s/001.txt", Bytes{'7'});
  archive_write_close(a);
  archive_write_free(a);
  buf.resize(used);
  return buf;
}

Bytes gzip_bytes(const Bytes& in) {
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

std::vector<Bytes> seeds() {
  std::vector<Bytes> s;
  Bytes idx{0, 0, 0, 0, 8, 3};  // selector, mode, magic
  be32(idx, 3);
  be32(idx, 4);
  be32(idx, 4);
  for (int i = 0; i < 48; ++i) idx.push_back(static_cast<uint8_t>(i));
  s.push_back(idx);
  Bytes labels{0, 1, 0, 0, 8, 1};
  be32(labels, 3);
  labels.insert(labels.end(), {1, 2, 9});
  s.push_back(labels);
  for (int variant : {10, 100}) {
    Bytes c{static_cast<uint8_t>(variant == 10 ? 1 : 2), 0};
    for (int r = 0; r < 2; ++r) {
      if (variant == 100) c.push_back(1);
      c.push_back(static_cast<uint8_t>(r + 3));
      for (int i = 0; i < 3072; ++i) c.push_back(static_cast<uint8_t>(i));
    }
    s.push_back(c);
  }
  for (bool gz : {false, true}) {
    Bytes t{3, 0};
    const Bytes tar = tar_bytes(gz);
    t.insert(t.end(), tar.begin(), tar.end());
    s.push_back(t);
  }
  Bytes j{4, 0};
  const Bytes jpeg = jpeg_bytes(9, 7);
  j.insert(j.end(), jpeg.begin(), jpeg.end());
  s.push_back(j);
  Bytes p{4, 1};
  const Bytes png = png_bytes(5, 6, true);
  p.insert(p.end(), png.begin(), png.end());
  s.push_back(p);
  Bytes g{5, 1};
  const Bytes gz = gzip_bytes(Bytes(idx.begin() + 2, idx.end()));
  g.insert(g.end(), gz.begin(), gz.end());
  s.push_back(g);
  return s;
}

Bytes mutate(const Bytes& in, std::mt19937_64& rng) {
  Bytes b = in;
  const int n = 1 + static_cast<int>(rng() % 4);
  static const uint8_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 8, 16, 64};
  for (int m = 0; m < n && b.size() > 2; ++m) {
    const size_t at = 2 + rng() % (b.size() - 2);
    switch (rng() % 7) {
      case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
      case 1: b[at] = interesting[rng() % sizeof interesting]; break;
      case 2: b.resize(at); break;
      case 3: b[at] = static_cast<uint8_t>(rng()); break;
      case 4: {  // insert random bytes
        Bytes ins(1 + rng() % 16);
        for (auto& x : ins) x = static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<long>(at), ins.begin(), ins.end());
        break;
      }
      case 5: {  // overwrite with a copy of another region
        const size_t from = 2 + rng() % (b.size() - 2);
        const size_t len = std::min<size_t>({static_cast<size_t>(1 + rng() % 64), b.size() - from, b.size() - at});
        std::memmove(b.data() + at, b.data() + from, len);
        break;
      }
      case 6: be32(b, static_cast<uint32_t>(rng())); break;
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  uint64_t seed = 1;
  std::string seeds_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--write-seeds" && i + 1 < argc) seeds_dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--seed N] [--write-seeds DIR]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<Bytes> corpus = seeds();
  if (!seeds_dir.empty()) {
    for (size_t i = 0; i < corpus.size(); ++i) {
      std::ofstream out(seeds_dir + "/seed" + std::to_string(i), std::ios::binary);
      out.write(reinterpret_cast<const char*>(corpus[i].data()), static_cast<std::streamsize>(corpus[i].size()));
    }
    return 0;
  }
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  int64_t runs = 0;
  Bytes input;
  try {
    for (const auto& s : corpus) LLVMFuzzerTestOneInput(s.data(), s.size());
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
      for (int k = 0; k < 64; ++k, ++runs) {
        input = mutate(corpus[rng() % corpus.size()], rng);
        LLVMFuzzerTestOneInput(input.data(), input.size());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than DataError escaped after %lld runs: %s\n",
                 static_cast<long long>(runs), e.what());
    std::ofstream out("fuzz-failure.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
    return 1;
  }
  std::printf("fuzz: %lld mutated inputs in %.0f s, no failure\n", static_cast<long long>(runs), seconds);
  return 0;
}

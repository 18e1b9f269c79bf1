// Implements: reading whole files (gunzipping .gz), listing folders, small string helpers.
#include <dirent.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "formats.h"

#include "saturate/core/errors.h"

namespace saturate::data {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw DataError(dir, -1, std::string("cannot list the folder: ") + std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string mib_text(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& name, bool* truncated) {
  std::vector<uint8_t> out;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw DataError(name, 0, "zlib could not start inflating");
  zs.next_in = const_cast<Bytef*>(data);
  zs.avail_in = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
  size_t fed = zs.avail_in;
  out.resize(std::min(std::max<size_t>(size * 4, 1 << 16), std::max<size_t>(size_t{64} << 20, 16 * size)));
  int rc = Z_OK;
  // a decompression bomb stops here, not in the machine's memory: no real data set packs 16x
  const size_t most = std::max<size_t>(size_t{64} << 20, 16 * size);
  while (true) {
    if (zs.total_out >= most) {
      inflateEnd(&zs);
      throw DataError(name, -1, "unpacks to more than " + mib_text(static_cast<int64_t>(most)) + " (16 x its " +
                                    mib_text(static_cast<int64_t>(size)) +
                                    " on disk, at least 64 MiB): a decompression bomb, not data");
    }
    if (zs.total_out == out.size()) out.resize(std::min(out.size() * 2, most));
    zs.next_out = out.data() + zs.total_out;
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - zs.total_out, 1u << 30));
    if (zs.avail_in == 0 && fed < size) {
      const size_t more = std::min<size_t>(size - fed, 1u << 30);
      zs.next_in = const_cast<Bytef*>(data + fed);
      zs.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == size) break;  // input ended early
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = zs.msg ? zs.msg : "corrupt data";
      const auto at = static_cast<int64_t>(zs.total_in);
      inflateEnd(&zs);
      throw DataError(name, at, "not a valid gzip stream (zlib: " + msg + ")");
    }
  }
  const bool ended = rc == Z_STREAM_END;
  const auto consumed = static_cast<int64_t>(zs.total_in);
  out.resize(zs.total_out);
  inflateEnd(&zs);
  if (!ended) {
    if (!truncated) throw DataError(name, consumed, "truncated gzip stream (the file ends inside the data)");
    *truncated = true;
  }
  return out;
}

std::vector<uint8_t> read_file(const std::string& path, bool* truncated) {
  if (is_directory(path)) throw DataError(path, -1, "is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path, -1, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff length = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(length > 0 ? static_cast<size_t>(length) : 0);
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), length))
    throw DataError(path, static_cast<int64_t>(in.gcount()), "read error");
  if (truncated) *truncated = false;
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return gunzip(bytes.data(), bytes.size(), path, truncated);
  return bytes;
}

HeldBytes::HeldBytes(std::string dataset, std::string items, std::string what, int64_t budget_bytes)
    : dataset_(std::move(dataset)), items_(std::move(items)), what_(std::move(what)), budget_bytes_(budget_bytes) {}

void HeldBytes::add(int64_t bytes) {
  bytes_ += bytes;
  ++count_;
  if (budget_bytes_ > 0 && bytes_ > budget_bytes_)  // no fmt here: the parsers' fuzz build links this file alone
    throw UsageError("`data` " + dataset_ + ": " + std::to_string(count_) + " " + items_ + " hold " + mib_text(bytes_) +
                     " in memory (" + what_ + ") by the time it is opened, more than the `memory_budget` " +
                     mib_text(budget_bytes_) + "; give a smaller dataset (fewer " + items_ + ") or a larger budget");
}

void HeldBytes::will_read(const std::string& path) const {
  struct stat st {};
  if (budget_bytes_ <= 0 || ::stat(path.c_str(), &st) != 0) return;
  if (bytes_ + static_cast<int64_t>(st.st_size) > budget_bytes_)
    throw UsageError("`data` " + dataset_ + ": " + path + " holds " + mib_text(static_cast<int64_t>(st.st_size)) +
                     ", read whole beside the " + std::to_string(count_) + " " + items_ + " held so far (" +
                     mib_text(bytes_) + "), more than the `memory_budget` " + mib_text(budget_bytes_) +
                     "; give smaller shards or a larger budget");
}

}  // namespace saturate::data

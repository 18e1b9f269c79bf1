#include "saturate/core/units.h"

#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

int64_t MemorySize::resolve(int64_t capacity_bytes) const {
  if (!is_fraction()) return bytes;
  return static_cast<int64_t>(std::floor(fraction * static_cast<double>(capacity_bytes)));
}

namespace {

struct Unit {
  const char* name;
  double factor;
};

constexpr Unit kUnits[] = {
    {"", 1.0},          {"b", 1.0},
    {"k", 1e3},         {"kb", 1e3},         {"kib", 1024.0},
    {"m", 1e6},         {"mb", 1e6},         {"mib", 1048576.0},
    {"g", 1e9},         {"gb", 1e9},         {"gib", 1073741824.0},
    {"t", 1e12},        {"tb", 1e12},        {"tib", 1099511627776.0},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

MemorySize parse_memory_size(const std::string& text, const std::string& flag) {
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format(
        "{}: invalid size '{}' ({}); expected bytes with an optional unit (B, kB, KiB, MB, MiB, "
        "GB, GiB, TB, TiB), e.g. 512MiB, 2GiB, 1.5GB, 1000000, or a fraction of the device below 1, "
        "e.g. 0.9",
        flag, text, why));
  };
  size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  const std::string number = text.substr(0, pos);
  std::string unit = lower(text.substr(pos));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  if (number.empty()) throw bad("no number");
  if (number.find('.') != number.rfind('.')) throw bad("more than one decimal point");
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(number, &used);
    if (used != number.size()) throw bad("not a number");
  } catch (const std::logic_error&) {
    throw bad("not a number");
  }
  const Unit* found = nullptr;
  for (const Unit& u : kUnits)
    if (unit == u.name) found = &u;
  if (!found) throw bad(fmt::format("unknown unit '{}'", text.substr(pos)));
  if (!(value > 0)) throw bad("must be positive");
  MemorySize size;
  if (unit.empty() && value < 1.0) {
    size.fraction = value;
    return size;
  }
  const double bytes = value * found->factor;
  if (bytes >= static_cast<double>(std::numeric_limits<int64_t>::max())) throw bad("too large");
  if (unit.empty() && number.find('.') != std::string::npos)
    throw bad("a byte count must be whole; fractions must be below 1");
  size.bytes = static_cast<int64_t>(std::llround(bytes));
  if (size.bytes < 1) throw bad("below one byte");
  return size;
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double ab = std::fabs(b);
  if (ab >= 1073741824.0) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (ab >= 1048576.0) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (ab >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string format_flops(double flops) {
  static const char* const prefixes[] = {"P", "T", "G", "M", "k"};
  double scale = 1e15;
  for (const char* p : prefixes) {
    if (std::fabs(flops) >= scale) return fmt::format("{:.{}f} {}FLOP", flops / scale, flops / scale >= 100 ? 1 : 2, p);
    scale /= 1000;
  }
  return fmt::format("{:.0f} FLOP", flops);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& flag) {
  std::vector<int64_t> dims;
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format(
        "{}: invalid shape '{}' ({}); expected positive integers joined by 'x', e.g. 3x224x224 or 784",
        flag, text, why));
  };
  if (text.empty()) throw bad("empty");
  size_t start = 0;
  while (true) {
    const size_t end = text.find_first_of("xX", start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty()) throw bad("empty dimension");
    for (char c : part)
      if (!std::isdigit(static_cast<unsigned char>(c))) throw bad(fmt::format("'{}' is not a positive integer", part));
    if (part.size() > 9) throw bad(fmt::format("dimension '{}' is too large", part));
    const int64_t d = std::stoll(part);
    if (d <= 0) throw bad("dimensions must be positive");
    dims.push_back(d);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (dims.size() > 4) throw bad("at most 4 dimensions");
  // one sample's elements: a batch of them must still be counted in 64 bits (and held)
  double product = 1;
  for (int64_t d : dims) product *= static_cast<double>(d);
  if (product > 1e12)
    throw bad(fmt::format("{:.3g} values per sample, more than 10^12; no sample is that large", product));
  return dims;
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

}  // namespace saturate

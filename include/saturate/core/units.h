// Implements: parsing and printing of byte sizes and tensor shapes given on the command line.
//   "512MiB", "2GiB", "1.5GB", "1000000" (bytes); a value below 1 ("0.9") is a fraction of
//   the device's memory. Shapes are "3x224x224" or "784".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace saturate {

/// A memory amount as the user wrote it: either absolute bytes or a fraction of the device.
struct MemorySize {
  int64_t bytes = 0;       ///< absolute size, when fraction == 0
  double fraction = 0.0;   ///< in (0, 1) when the user gave a fraction of the device
  bool is_fraction() const { return fraction > 0.0; }
  /// Bytes for a device of `capacity_bytes` (fractions are taken of it).
  int64_t resolve(int64_t capacity_bytes) const;
};

/// Parses "512MiB", "2GiB", "1.5GB", "100kB", "1000000", "0.9". Throws UsageError naming `flag`.
MemorySize parse_memory_size(const std::string& text, const std::string& flag = "size");

/// "1.50 GiB", "512.0 MiB", "900 B".
std::string format_bytes(int64_t bytes);

/// "1.23 GFLOP", "456.0 TFLOP", "12 FLOP" (decimal prefixes, as FLOP rates are quoted).
std::string format_flops(double flops);

/// Parses "3x224x224" into {3, 224, 224}; every dimension must be a positive integer.
std::vector<int64_t> parse_shape(const std::string& text, const std::string& flag = "shape");

/// "3x224x224".
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace saturate

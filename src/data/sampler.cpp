#include "saturate/data/sampler.h"

#include <numeric>
#include <string>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, const ShardOptions& o) {
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    throw UsageError("rank " + std::to_string(o.rank) + " of world size " + std::to_string(o.world_size) +
                     ": need 0 <= rank < world size");
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), int64_t{0});
  if (o.shuffle) {
    // Fisher-Yates with our own bounded draws: std::uniform_int_distribution differs by library.
    uint64_t state = mix64(seed ^ mix64(static_cast<uint64_t>(epoch) + 0x51ED2701u));
    for (int64_t i = n - 1; i > 0; --i) {
      state = mix64(state);
      const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(state) * static_cast<uint64_t>(i + 1)) >> 64);
      std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
    }
  }
  if (!o.shares.empty()) {
    if (static_cast<int64_t>(o.shares.size()) != o.world_size)
      throw UsageError("shares", fmt::format("{} values for {} ranks; give one share per rank", o.shares.size(),
                                             o.world_size));
    int64_t global = 0, offset = 0;
    for (size_t r = 0; r < o.shares.size(); ++r) {
      if (o.shares[r] < 1)
        throw UsageError("shares", fmt::format("rank {}'s share is {}; every rank needs 1 or more samples", r,
                                               o.shares[r]));
      if (static_cast<int>(r) < o.rank) offset += o.shares[r];
      global += o.shares[r];
    }
    const int64_t mine_per_batch = o.shares[static_cast<size_t>(o.rank)];
    std::vector<int64_t> mine;
    mine.reserve(static_cast<size_t>(n / global * mine_per_batch));
    for (int64_t start = 0; start + global <= n; start += global)
      for (int64_t p = start + offset; p < start + offset + mine_per_batch; ++p) mine.push_back(all[static_cast<size_t>(p)]);
    return mine;
  }
  if (o.world_size == 1) return all;
  const int64_t world = o.world_size;
  const int64_t per_rank = o.pad ? (n + world - 1) / world : 0;
  std::vector<int64_t> mine;
  if (o.pad) {
    for (int64_t k = 0; k < per_rank; ++k) mine.push_back(all[static_cast<size_t>((o.rank + k * world) % n)]);
  } else {
    for (int64_t p = o.rank; p < n; p += world) mine.push_back(all[static_cast<size_t>(p)]);
  }
  return mine;
}

}  // namespace saturate

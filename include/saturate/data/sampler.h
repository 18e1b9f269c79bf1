// Implements: which samples a rank visits in an epoch, in which order (what PyTorch's
// RandomSampler + DistributedSampler do), and the seeded mixing every random choice derives
// from, so that a batch depends on (seed, epoch, position) only, never on thread timing.
#pragma once
#include <cstdint>
#include <vector>

namespace saturate {

/// splitmix64's finaliser: a well-mixed 64-bit value from any input.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct ShardOptions {
  bool shuffle = true;   ///< a fresh permutation each epoch (false: 0, 1, 2, ...)
  int rank = 0;          ///< this process's rank in [0, world_size)
  int world_size = 1;
  /// false (default): shards are disjoint and cover every sample; sizes differ by at most one.
  /// true: every rank gets ceil(n / world_size) samples, the last ones repeating from the start
  /// of the permutation (DistributedSampler's padding, for equal step counts).
  bool pad = false;
  /// Unequal shares (ranks of unequal speed or memory): each rank's samples of every global
  /// batch, one value per rank (their sum is the global batch). Rank r takes positions
  /// [k G + off_r, k G + off_r + shares[r]) of global batch k (off_r: the shares before r), so
  /// the ranks' step-k batches together are the one-process batch k; only whole global batches
  /// are visited, so every rank has as many steps (`pad` does not apply). Empty: equal shares.
  std::vector<int64_t> shares;
};

/// The dataset indices rank `o.rank` visits in `epoch`, in order. The permutation is drawn from
/// (seed, epoch) and is the same on every rank; rank r takes positions r, r + world, ...
/// With `o.shares`, each rank's part of every whole global batch (above).
/// Throws UsageError for a rank outside [0, world_size), or shares that are not one positive
/// count per rank.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, const ShardOptions& o);

}  // namespace saturate

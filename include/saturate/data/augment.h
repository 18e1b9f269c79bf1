// Implements: the per-sample augmentation the loader's workers run, fused into one pass from
// decoded 8-bit pixels to the model's float input: resize when the size differs (nearest),
// random crop with zero padding, horizontal flip, (x / 255 - mean) / std, HWC -> CHW, and the
// channel count the model wants (grey <-> RGB). torchvision's RandomCrop(size, padding) +
// RandomHorizontalFlip + ToTensor + Normalize, in that order. No LibTorch here.
#pragma once
#include <cstdint>
#include <vector>

#include "saturate/data/dataset.h"

namespace saturate {

struct AugmentOptions {
  /// Random crop: pad each side by this many zero pixels, then crop the output size at a random
  /// offset. 0: no crop.
  int64_t crop_padding = 4;
  /// Flip left-right with probability 1/2.
  bool horizontal_flip = true;
  /// Per channel (one value: every channel). Default maps [0, 1] to [-1, 1].
  std::vector<float> mean{0.5f};
  std::vector<float> std{0.5f};
};

/// Writes `image` as `shape` floats (CHW) at `out`. The random choices come from `rng_seed`
/// only. Throws UsageError for a zero std.
void augment_into(const Image& image, const SampleShape& shape, const AugmentOptions& o, uint64_t rng_seed, float* out);

}  // namespace saturate

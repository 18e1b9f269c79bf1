// The first n Fashion-MNIST training images as tensors (Debian's dataset-fashion-mnist), for
// tests that need real data in memory; nullopt when the package is not installed.
#pragma once
#include <memory>
#include <optional>

#include <torch/torch.h>

#include "saturate/data/dataset.h"

namespace saturate::testing {

struct TensorPool {
  torch::Tensor inputs;   ///< [n, 1, 28, 28] float, pixels scaled to [0, 1]
  torch::Tensor targets;  ///< [n] int64
};

inline std::optional<TensorPool> fashion_pool(int64_t n, const std::string& split = "train") {
  DatasetOptions o;
  o.split = split;
  std::shared_ptr<const Dataset> ds;
  try {
    ds = open_dataset("fashion-mnist", o);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  TensorPool p{torch::empty({n, 1, 28, 28}), torch::empty({n}, torch::kLong)};
  Image img;
  for (int64_t i = 0; i < n; ++i) {
    p.targets[i] = ds->get(i, 1, img);
    p.inputs[i] = torch::from_blob(img.pixels.data(), {1, 28, 28}, torch::kUInt8).to(torch::kFloat) / 255.0;
  }
  return p;
}

}  // namespace saturate::testing

// The first n Fashion-MNIST training images as tensors (Debian's dataset-fashion-mnist), for
// tests that need real data in memory. scripts/setup.sh installs the package: a test that needs it
// fails without it, saying so (issue 46: it skipped silently).
#pragma once
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "saturate/data/dataset.h"

namespace saturate::testing {

struct TensorPool {
  torch::Tensor inputs;   ///< [n, 1, 28, 28] float, pixels scaled to [0, 1]
  torch::Tensor targets;  ///< [n] int64
};

/// Where Debian's dataset-fashion-mnist puts the data.
inline const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Throws (the test fails) naming scripts/setup.sh when the package is not installed.
inline void require_fashion_mnist() {
  if (!std::ifstream(std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz").good())
    throw std::runtime_error(std::string("Debian's dataset-fashion-mnist is not installed (no ") + kFashionMnistDir +
                             "): run scripts/setup.sh, which installs it");
}

inline TensorPool fashion_pool(int64_t n, const std::string& split = "train") {
  require_fashion_mnist();
  DatasetOptions o;
  o.split = split;
  std::shared_ptr<const Dataset> ds = open_dataset("fashion-mnist", o);
  TensorPool p{torch::empty({n, 1, 28, 28}), torch::empty({n}, torch::kLong)};
  Image img;
  for (int64_t i = 0; i < n; ++i) {
    p.targets[i] = ds->get(i, 1, img);
    p.inputs[i] = torch::from_blob(img.pixels.data(), {1, 28, 28}, torch::kUInt8).to(torch::kFloat) / 255.0;
  }
  return p;
}

}  // namespace saturate::testing

// mlp: Flatten -> (Linear, ReLU) x hidden_layers -> Linear; each hidden layer is one block.
#include "models/builders.h"

namespace saturate {

BlockModel make_mlp(int64_t in_features, int64_t width, int64_t hidden_layers, int64_t classes) {
  namespace nn = torch::nn;
  std::vector<nn::AnyModule> blocks;
  int64_t in = in_features;
  for (int64_t i = 0; i < hidden_layers; ++i) {
    blocks.emplace_back(Chain(nn::Linear(in, width), nn::ReLU()));
    in = width;
  }
  return BlockModel(nn::AnyModule(nn::Flatten()), std::move(blocks), nn::AnyModule(nn::Linear(in, classes)));
}

}  // namespace saturate

// convnet: three conv-batchnorm-relu blocks (32, 64, 128 channels; the last two pool by 2), then
// global average pooling and a linear classifier. Small enough for Fashion-MNIST on a CPU.
#include "models/builders.h"

namespace saturate {

BlockModel make_convnet(int64_t channels, int64_t classes) {
  namespace nn = torch::nn;
  const auto conv_block = [](int64_t in, int64_t out, bool pool) {
    Chain s(nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1).bias(false)), nn::BatchNorm2d(out),
                     nn::ReLU());
    if (pool) s->push_back(nn::MaxPool2d(2));
    return nn::AnyModule(s);
  };
  std::vector<nn::AnyModule> blocks;
  blocks.push_back(conv_block(32, 64, true));
  blocks.push_back(conv_block(64, 128, true));
  Chain head(nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(128, classes));
  return BlockModel(conv_block(channels, 32, false), std::move(blocks), nn::AnyModule(head));
}

}  // namespace saturate

// resnet18 / resnet50 as torchvision builds them (v1.5: the stride sits on the 3x3 conv of a
// bottleneck). Each residual block is one block of the BlockModel, the granularity at which
// activation checkpointing recomputes.
#include <cmath>

#include "models/builders.h"

namespace saturate {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

struct ResidualBlockImpl : nn::Module {
  ResidualBlockImpl(int64_t in, int64_t planes, int64_t stride, bool bottleneck) {
    const int64_t expansion = bottleneck ? 4 : 1;
    const int64_t out = planes * expansion;
    if (bottleneck) {
      body = nn::Sequential(conv(in, planes, 1, 1), nn::BatchNorm2d(planes), nn::ReLU(),
                            conv(planes, planes, 3, stride), nn::BatchNorm2d(planes), nn::ReLU(),
                            conv(planes, out, 1, 1), nn::BatchNorm2d(out));
    } else {
      body = nn::Sequential(conv(in, planes, 3, stride), nn::BatchNorm2d(planes), nn::ReLU(),
                            conv(planes, planes, 3, 1), nn::BatchNorm2d(planes));
    }
    register_module("body", body);
    if (stride != 1 || in != out) {
      downsample = nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out));
      register_module("downsample", downsample);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor identity = downsample ? downsample->forward(x) : x;
    return torch::relu(body->forward(x) + identity);
  }
  nn::Sequential body{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(ResidualBlock);

}  // namespace

BlockModel make_resnet(int depth, int64_t channels, int64_t classes) {
  const bool bottleneck = depth == 50;
  const std::vector<int> counts = bottleneck ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{2, 2, 2, 2};
  const int64_t expansion = bottleneck ? 4 : 1;
  Chain stem(conv(channels, 64, 7, 2), nn::BatchNorm2d(64), nn::ReLU(),
                      nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
  std::vector<nn::AnyModule> blocks;
  int64_t in = 64;
  for (size_t stage = 0; stage < counts.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < counts[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      blocks.emplace_back(ResidualBlock(in, planes, stride, bottleneck));
      in = planes * expansion;
    }
  }
  Chain head(nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(512 * expansion, classes));
  BlockModel model(nn::AnyModule(stem), std::move(blocks), nn::AnyModule(head));
  // torchvision's initialisation: He-normal convolutions (fan_out), unit batch-norm scale.
  torch::NoGradGuard no_grad;
  for (auto& m : model->modules(/*include_self=*/false)) {
    if (auto* c = m->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = m->as<nn::BatchNorm2d>()) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  }
  return model;
}

}  // namespace saturate

#include "models/flops.h"

#include <vector>

namespace saturate {
namespace {

/// Sums one sample's products layer by layer.
struct Tally {
  ModelFlops f;
  /// A product of `macs` multiply-adds per sample; `input_grad`: the backward also computes the
  /// gradient of its input (every layer but the first).
  void product(double macs, bool input_grad) {
    f.forward_per_sample += 2 * macs;
    f.training_per_sample += 2 * macs * (input_grad ? 3 : 2);
  }
};

/// Output size of a convolution or pooling window along one axis.
int64_t out_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding) {
  return (in + 2 * padding - kernel) / stride + 1;
}

struct Image {
  int64_t channels, height, width;
};

/// A square convolution with padding kernel/2 (as the zoo builds them); returns its output.
Image conv(Tally& t, Image in, int64_t out_channels, int64_t kernel, int64_t stride, bool input_grad) {
  const Image out{out_channels, out_size(in.height, kernel, stride, kernel / 2), out_size(in.width, kernel, stride, kernel / 2)};
  t.product(static_cast<double>(out.channels * out.height * out.width) * in.channels * kernel * kernel, input_grad);
  return out;
}

ModelFlops mlp(const ModelSpec& s) {
  Tally t;
  int64_t in = 1;
  for (int64_t d : s.input_shape) in *= d;
  for (int64_t i = 0; i < s.layers; ++i) {
    t.product(static_cast<double>(in) * s.width, /*input_grad=*/i > 0);
    in = s.width;
  }
  t.product(static_cast<double>(in) * s.classes, s.layers > 0);
  return t.f;
}

ModelFlops convnet(const ModelSpec& s) {
  Tally t;
  Image x{s.input_shape[0], s.input_shape[1], s.input_shape[2]};
  x = conv(t, x, 32, 3, 1, false);
  x = conv(t, x, 64, 3, 1, true);
  x = {x.channels, x.height / 2, x.width / 2};  // max pool 2
  x = conv(t, x, 128, 3, 1, true);
  t.product(128.0 * 4 * 4 * s.classes, true);  // the classifier after the 4x4 average pool
  return t.f;
}

ModelFlops resnet(const ModelSpec& s, bool bottleneck) {
  Tally t;
  Image x{s.input_shape[0], s.input_shape[1], s.input_shape[2]};
  x = conv(t, x, 64, 7, 2, false);
  x = {x.channels, out_size(x.height, 3, 2, 1), out_size(x.width, 3, 2, 1)};  // max pool 3, stride 2
  const std::vector<int> counts = bottleneck ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{2, 2, 2, 2};
  const int64_t expansion = bottleneck ? 4 : 1;
  for (size_t stage = 0; stage < counts.size(); ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < counts[stage]; ++i) {
      const int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      const int64_t out = planes * expansion;
      Image y = x;
      if (bottleneck) {
        y = conv(t, y, planes, 1, 1, true);
        y = conv(t, y, planes, 3, stride, true);
        y = conv(t, y, out, 1, 1, true);
      } else {
        y = conv(t, y, planes, 3, stride, true);
        y = conv(t, y, planes, 3, 1, true);
      }
      if (stride != 1 || x.channels != out) conv(t, x, out, 1, stride, true);  // the downsample path
      x = y;
    }
  }
  t.product(static_cast<double>(x.channels) * s.classes, true);
  return t.f;
}

ModelFlops gpt(const ModelSpec& s) {
  Tally t;
  const double tokens = static_cast<double>(s.seq_len), c = static_cast<double>(s.width);
  // the embeddings are lookups; every product's input descends from them and needs a gradient
  for (int64_t i = 0; i < s.layers; ++i) {
    t.product(tokens * c * 3 * c, true);  // qkv
    // attention: scores q k^T and their weighted sum of v, both over the whole (causal) square,
    // as fused attention kernels compute and FlopCounterMode counts them
    t.product(2 * tokens * tokens * c, true);
    t.product(tokens * c * c, true);      // proj
    t.product(tokens * c * 4 * c, true);  // fc
    t.product(tokens * 4 * c * c, true);  // out
  }
  t.product(tokens * c * static_cast<double>(s.vocab), true);  // the head
  return t.f;
}

}  // namespace

std::optional<ModelFlops> analytic_flops(const ModelSpec& s) {
  if (s.name == "mlp") return mlp(s);
  if (s.name == "convnet") return convnet(s);
  if (s.name == "resnet18") return resnet(s, false);
  if (s.name == "resnet50") return resnet(s, true);
  if (s.name == "gpt") return gpt(s);
  return std::nullopt;
}

}  // namespace saturate

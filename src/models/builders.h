// Private: one builder per built-in model family.
#pragma once
#include <cstdint>
#include <vector>

#include "saturate/models/model.h"

namespace saturate {
BlockModel make_mlp(int64_t in_features, int64_t width, int64_t hidden_layers, int64_t classes);
BlockModel make_convnet(int64_t channels, int64_t classes);
/// depth 18 (BasicBlock, 2-2-2-2) or 50 (Bottleneck, 3-4-6-3), as torchvision builds them.
BlockModel make_resnet(int depth, int64_t channels, int64_t classes);
BlockModel make_gpt(int64_t layers, int64_t width, int64_t heads, int64_t seq_len, int64_t vocab);
std::unique_ptr<Model> load_torchscript_model(const std::string& path);
}  // namespace saturate

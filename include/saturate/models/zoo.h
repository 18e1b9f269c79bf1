// Implements: the built-in models (mlp, convnet, resnet18, resnet50, gpt) and loading a
// TorchScript file, behind one spec that the command line fills.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "saturate/models/model.h"

namespace saturate {

struct ModelSpec {
  std::string name;                  ///< mlp | convnet | resnet18 | resnet50 | gpt | path to a .pt file
  std::vector<int64_t> input_shape;  ///< one sample, e.g. {3,224,224}; empty: the model's default
  int64_t classes = 0;               ///< 0: the model's default (10; 1000 for resnets)
  int64_t layers = 0;                ///< gpt blocks / mlp hidden layers; 0: default (4 / 3)
  int64_t width = 0;                 ///< gpt embedding / mlp hidden width; 0: default (256 / 1024)
  int64_t heads = 0;                 ///< gpt attention heads; 0: default 4
  int64_t seq_len = 0;               ///< gpt context; 0: default 128
  int64_t vocab = 0;                 ///< gpt vocabulary; 0: default 8192
  bool tokens = false;               ///< a TorchScript model that takes token ids (uses seq_len, vocab)
  uint64_t seed = 0;                 ///< initial weights
};

struct BuiltModel {
  std::unique_ptr<Model> model;
  InputKind input_kind = InputKind::kFeatures;
  std::vector<int64_t> sample_shape;  ///< features: the input shape; tokens: {seq_len}
  int64_t classes = 0;                ///< classes, or the vocabulary for tokens
  ModelSpec spec;                     ///< with every default filled in
};

/// The names of the built-in models.
const std::vector<std::string>& zoo_model_names();

/// True when `name` looks like a file (contains '/' or ends in .pt/.pth/.zip).
bool is_model_file(const std::string& name);

/// Fills defaults and checks the spec; throws UsageError naming the flag at fault.
ModelSpec resolve_model_spec(ModelSpec spec);

/// Builds (or loads) the model on the CPU with weights from spec.seed.
BuiltModel build_model(const ModelSpec& spec);

}  // namespace saturate

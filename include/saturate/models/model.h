// Implements: what the probe, the search and training need from a model, whoever wrote it.
// Built-in models are BlockModels (stem -> blocks -> head) so that activation checkpointing can
// wrap each block; TorchScript models are trained through their parameters().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

namespace saturate {

/// What a model eats and what its loss compares against.
enum class InputKind { kFeatures, kTokens };

class Model {
 public:
  virtual ~Model() = default;
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  virtual std::vector<torch::Tensor> parameters() = 0;
  virtual void train(bool on) = 0;
  virtual void to(const torch::Device& device) = 0;
  virtual std::string name() const = 0;
  /// Number of trainable scalars.
  int64_t parameter_count();
  /// Parameters and buffers (batch-norm statistics) by name: what a checkpoint must hold.
  virtual std::vector<std::pair<std::string, torch::Tensor>> named_tensors() = 0;
  /// Writes the model (TorchScript: its archive; built-in: a torch::save archive).
  virtual void save(const std::string& path) = 0;
  /// The torch::nn module behind a built-in model (nullptr for TorchScript).
  virtual std::shared_ptr<torch::nn::Module> module() { return nullptr; }
};

/// A Sequential with a plain forward(Tensor), so that it can live in an AnyModule.
class ChainImpl : public torch::nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return SequentialImpl::forward(x); }
};
TORCH_MODULE(Chain);

/// stem -> blocks... -> head, each a torch::nn module taking and returning one tensor.
class BlockModelImpl : public torch::nn::Module {
 public:
  BlockModelImpl(torch::nn::AnyModule stem, std::vector<torch::nn::AnyModule> blocks, torch::nn::AnyModule head);
  torch::Tensor forward(torch::Tensor x);
  torch::nn::AnyModule stem;
  std::vector<torch::nn::AnyModule> blocks;
  torch::nn::AnyModule head;
};
TORCH_MODULE(BlockModel);

/// Adapts a BlockModel to Model.
std::unique_ptr<Model> wrap_block_model(const std::string& name, BlockModel model);

/// Access to the blocks when a Model is a BlockModel (nullptr otherwise).
BlockModelImpl* as_block_model(Model& model);

}  // namespace saturate

#include "saturate/models/model.h"

#include <torch/serialize.h>

namespace saturate {

int64_t Model::parameter_count() {
  int64_t n = 0;
  for (const auto& p : parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

BlockModelImpl::BlockModelImpl(torch::nn::AnyModule stem_in, std::vector<torch::nn::AnyModule> blocks_in,
                               torch::nn::AnyModule head_in)
    : stem(std::move(stem_in)), blocks(std::move(blocks_in)), head(std::move(head_in)) {
  register_module("stem", stem.ptr());
  for (size_t i = 0; i < blocks.size(); ++i) register_module("block" + std::to_string(i), blocks[i].ptr());
  register_module("head", head.ptr());
}

torch::Tensor BlockModelImpl::forward(torch::Tensor x) {
  x = stem.forward(x);
  for (auto& b : blocks) x = b.forward(x);
  return head.forward(x);
}

namespace {

class BlockModelAdapter final : public Model {
 public:
  BlockModelAdapter(std::string name, BlockModel m) : name_(std::move(name)), model_(std::move(m)) {}
  torch::Tensor forward(const torch::Tensor& input) override { return model_->forward(input); }
  std::vector<torch::Tensor> parameters() override { return model_->parameters(); }
  void train(bool on) override { model_->train(on); }
  void to(const torch::Device& device) override { model_->to(device); }
  std::string name() const override { return name_; }
  std::shared_ptr<torch::nn::Module> module() override { return model_.ptr(); }
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : model_->named_parameters()) out.emplace_back(p.key(), p.value());
    for (const auto& b : model_->named_buffers()) out.emplace_back(b.key(), b.value());
    return out;
  }
  void save(const std::string& path) override { torch::save(model_, path); }
  BlockModelImpl* impl() { return model_.get(); }

 private:
  std::string name_;
  BlockModel model_;
};

}  // namespace

std::unique_ptr<Model> wrap_block_model(const std::string& name, BlockModel model) {
  return std::make_unique<BlockModelAdapter>(name, std::move(model));
}

BlockModelImpl* as_block_model(Model& model) {
  auto* a = dynamic_cast<BlockModelAdapter*>(&model);
  return a ? a->impl() : nullptr;
}

}  // namespace saturate

#include "saturate/models/user_model.h"

#include <fmt/format.h>
#include <torch/serialize.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

class UserModuleModel final : public Model {
 public:
  explicit UserModuleModel(UserModel m) : m_(std::move(m)) {}
  torch::Tensor forward(const torch::Tensor& input) override { return m_.forward(input); }
  std::vector<torch::Tensor> parameters() override { return m_.module->parameters(); }
  void train(bool on) override { m_.module->train(on); }
  void to(const torch::Device& device) override { m_.module->to(device); }
  std::string name() const override { return m_.name; }
  std::shared_ptr<torch::nn::Module> module() override { return m_.module; }
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : m_.module->named_parameters()) out.emplace_back(p.key(), p.value());
    for (const auto& b : m_.module->named_buffers()) out.emplace_back(b.key(), b.value());
    return out;
  }
  void save(const std::string& path) override {
    torch::serialize::OutputArchive archive;
    m_.module->save(archive);
    archive.save_to(path);
  }

 private:
  UserModel m_;
};

}  // namespace

BuiltModel build_user_model(UserModel model) {
  if (!model.module) throw UsageError("module", "is empty; give the torch::nn module to train (e.g. net.ptr())");
  if (!model.forward)
    throw UsageError("forward", "is empty; give the function from the batch's inputs to the model's output");
  if (model.sample_shape.empty())
    throw UsageError("sample_shape", "is empty; give one sample's input shape, e.g. {1, 28, 28}");
  for (int64_t d : model.sample_shape)
    if (d <= 0)
      throw UsageError("sample_shape", fmt::format("has a dimension of {}; every dimension is at least 1", d));
  if (model.classes < 2)
    throw UsageError("classes", fmt::format("{} is below 2; give the number of label values", model.classes));
  BuiltModel b;
  b.input_kind = model.input_kind;
  b.sample_shape = model.sample_shape;
  b.classes = model.classes;
  b.spec.name = model.name;
  b.spec.input_shape = model.sample_shape;
  b.spec.classes = model.classes;
  if (model.input_kind == InputKind::kTokens) {
    b.spec.tokens = true;
    b.spec.seq_len = model.sample_shape.front();
    b.spec.vocab = model.classes;
  }
  b.model = std::make_unique<UserModuleModel>(std::move(model));
  return b;
}

}  // namespace saturate

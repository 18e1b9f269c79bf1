// A model exported from Python with torch.jit.script or torch.jit.trace, trained for real
// through its parameters().
// Its forward runs with the graph executor's optimizer off (GraphOptimizerEnabledGuard; the
// setting is per thread): the default profiling executor profiles the first run of a method,
// compiles an optimised plan with differentiable graphs in the second and may re-profile after
// a guard fails, so a trial's first steps cost seconds more than the steady step and hold other
// tensors than later steps. Unoptimised, every step runs the same plan (eager autograd, no
// compile); steady steps were no slower on CPU (bench/results/torchscript_timing.md).
// SATURATE_TORCHSCRIPT_OPTIMIZE=1 keeps LibTorch's default (e.g. for fusion on CUDA).
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include "models/builders.h"
#include "saturate/core/errors.h"

namespace saturate {
namespace {

bool graph_executor_optimize() {
  static const bool on = [] {
    const char* v = std::getenv("SATURATE_TORCHSCRIPT_OPTIMIZE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(std::string path, torch::jit::Module m) : path_(std::move(path)), module_(std::move(m)) {}
  torch::Tensor forward(const torch::Tensor& input) override {
    torch::jit::GraphOptimizerEnabledGuard optimize(graph_executor_optimize());
    c10::IValue out = module_.forward({input});
    if (out.isTuple()) out = out.toTupleRef().elements().at(0);
    if (!out.isTensor())
      throw UsageError(fmt::format("`model` {}: forward() must return a tensor (or a tuple starting with one), "
                                   "got {}", path_, out.tagKind()));
    return out.toTensor();
  }
  std::vector<torch::Tensor> parameters() override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.parameters()) out.push_back(p);
    return out;
  }
  void train(bool on) override { module_.train(on); }
  void to(const torch::Device& device) override { module_.to(device); }
  std::string name() const override { return path_; }
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() override {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& p : module_.named_parameters()) out.emplace_back(p.name, p.value);
    for (const auto& b : module_.named_buffers()) out.emplace_back(b.name, b.value);
    return out;
  }
  void save(const std::string& path) override { module_.save(path); }

 private:
  std::string path_;
  torch::jit::Module module_;
};

}  // namespace

std::unique_ptr<Model> load_torchscript_model(const std::string& path) {
  if (!std::ifstream(path).good())
    throw UsageError(fmt::format("`model` {}: no such file; give a built-in model (mlp, convnet, resnet18, "
                                 "resnet50, gpt) or a TorchScript file saved with torch.jit.save",
                                 path));
  torch::jit::Module m;
  try {
    m = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    throw UsageError(fmt::format("`model` {}: not a readable TorchScript file ({}); export the model with "
                                 "torch.jit.script(model).save(path) or torch.jit.trace(model, example).save(path)",
                                 path, why));
  }
  int64_t trainable = 0;
  for (const auto& p : m.parameters())
    if (p.requires_grad()) ++trainable;
  if (trainable == 0)
    throw UsageError(fmt::format("`model` {}: the TorchScript module has no trainable parameters (none has "
                                 "requires_grad=True); export it in training mode with its parameters",
                                 path));
  return std::make_unique<TorchScriptModel>(path, std::move(m));
}

}  // namespace saturate

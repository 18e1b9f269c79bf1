#include "saturate/step/activation_checkpoint.h"

#include <map>
#include <memory>
#include <mutex>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include "saturate/core/errors.h"
#include "saturate/step/rng_state.h"

namespace saturate {

std::string to_string(const CheckpointPolicy& p) {
  if (p.every == 0) return "none";
  if (p.every == 1) return "blocks";
  return fmt::format("every-{}", p.every);
}

CheckpointPolicy parse_checkpointing(const std::string& text) {
  if (text == "none") return {0};
  if (text == "blocks") return {1};
  if (text.rfind("every-", 0) == 0 && text.size() > 6 && text.size() < 10 &&
      text.find_first_not_of("0123456789", 6) == std::string::npos) {
    const int n = std::stoi(text.substr(6));
    if (n >= 1) return {n};
  }
  throw UsageError("checkpointing", fmt::format("unknown value '{}' (expected none, blocks or every-N with N >= 1, "
                               "e.g. every-2)",
                               text));
}

namespace {

thread_local int t_recomputing = 0;

/// Marks this thread as recomputing a segment while alive.
struct Recomputing {
  Recomputing() { ++t_recomputing; }
  ~Recomputing() { --t_recomputing; }
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const SegmentFn* fn, torch::Tensor input, at::TensorList params) {
    // `fn` must outlive backward: callers pass a model's own module (see below).
    ctx->saved_data["fn"] = reinterpret_cast<int64_t>(fn);
    // the generators dropout draws from: the CPU's, and the CUDA devices' for CUDA inputs
    const RngStates rng = capture_rng_states(input.device());
    ctx->saved_data["cpu_rng"] = rng.cpu;
    ctx->saved_data["cuda_rng"] = rng.cuda;
    const auto dev = input.device().type();
    ctx->saved_data["autocast"] = at::autocast::is_autocast_enabled(dev);
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(at::autocast::get_autocast_dtype(dev));
    variable_list saved{input};
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(saved);
    torch::NoGradGuard no_grad;
    return {(*fn)(input)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* fn = reinterpret_cast<const SegmentFn*>(ctx->saved_data["fn"].toInt());
    variable_list saved = ctx->get_saved_variables();
    torch::Tensor input = saved[0].detach().requires_grad_(saved[0].requires_grad());
    variable_list params(saved.begin() + 1, saved.end());
    // the same random numbers as the first run (dropout), then the generators are put back.
    const RngStates now = capture_rng_states(input.device());
    restore_rng_states({ctx->saved_data["cpu_rng"].toTensor(), ctx->saved_data["cuda_rng"].toTensorVector()});
    const auto dev = input.device().type();
    const bool autocast_was = at::autocast::is_autocast_enabled(dev);
    const auto dtype_was = at::autocast::get_autocast_dtype(dev);
    at::autocast::set_autocast_enabled(dev, ctx->saved_data["autocast"].toBool());
    at::autocast::set_autocast_dtype(dev, static_cast<at::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
    torch::Tensor out;
    {
      torch::AutoGradMode grad(true);
      Recomputing recomputing;
      out = (*fn)(input);
    }
    at::autocast::set_autocast_enabled(dev, autocast_was);
    at::autocast::set_autocast_dtype(dev, dtype_was);
    restore_rng_states(now);
    variable_list wrt;
    if (input.requires_grad()) wrt.push_back(input);
    for (auto& p : params) wrt.push_back(p);
    variable_list grads = torch::autograd::grad({out}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    variable_list result;
    result.push_back(torch::Tensor());  // fn
    size_t g = 0;
    result.push_back(input.requires_grad() ? grads[g++] : torch::Tensor());
    for (size_t i = 0; i < params.size(); ++i) result.push_back(grads[g++]);
    return result;
  }
};

}  // namespace

bool recomputing_checkpoint() { return t_recomputing > 0; }

torch::Tensor checkpoint(const SegmentFn& fn, const torch::Tensor& input, const std::vector<torch::Tensor>& params) {
  // the autograd node keeps a pointer to fn; it must live until backward has run.
  if (!torch::GradMode::is_enabled()) return fn(input);  // evaluation: nothing to save anyway
  // a TensorList (not a vector) so that autograd counts the parameters as inputs.
  return CheckpointFunction::apply(&fn, input, at::TensorList(params))[0];
}

const SegmentFn& segment_of(torch::nn::AnyModule& block) {
  // one callable per live block, so autograd nodes never point at a temporary; entries of
  // blocks that died are replaced (the callable does not own the block: no leak).
  static std::mutex mutex;
  static std::map<const void*, std::pair<std::weak_ptr<torch::nn::Module>, std::unique_ptr<SegmentFn>>> segments;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = segments[block.ptr().get()];
  if (!slot.second || slot.first.expired()) {
    slot.first = block.ptr();
    torch::nn::AnyModule* b = &block;
    slot.second = std::make_unique<SegmentFn>([b](const torch::Tensor& in) { return b->forward(in); });
  }
  return *slot.second;
}

torch::Tensor forward_with_checkpointing(BlockModelImpl& model, const torch::Tensor& x, const CheckpointPolicy& policy) {
  if (!policy.enabled()) return model.forward(x);
  torch::Tensor h = model.stem.forward(x);
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    auto& block = model.blocks[i];
    if (!policy.applies_to(i)) {
      h = block.forward(h);
      continue;
    }
    std::vector<torch::Tensor> params;
    for (auto& p : block.ptr()->parameters())
      if (p.requires_grad()) params.push_back(p);
    h = checkpoint(segment_of(block), h, params);
  }
  return model.head.forward(h);
}

}  // namespace saturate

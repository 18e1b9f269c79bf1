#include "saturate/step/fused_optimizer.h"

#include <map>

#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <torch/types.h>

namespace saturate {
namespace {

using StateMap = ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>;

/// The parameters of a group that have gradients (those an optimizer step updates).
std::vector<torch::Tensor> with_grads(const torch::optim::OptimizerParamGroup& group) {
  std::vector<torch::Tensor> out;
  for (const auto& p : group.params())
    if (p.grad().defined()) out.push_back(p);
  return out;
}

template <typename State>
State& state_of(StateMap& states, const torch::Tensor& p) {
  auto& slot = states[p.unsafeGetTensorImpl()];
  if (!slot) slot = std::make_unique<State>();
  return static_cast<State&>(*slot);
}

/// Adam and AdamW share their state and update, apart from how weight decay enters.
template <typename Options, typename State, typename Fused>
void adam_step(torch::optim::Optimizer& opt, StateMap& states, Fused fused) {
  torch::NoGradGuard no_grad;
  for (auto& group : opt.param_groups()) {
    const auto& o = static_cast<const Options&>(group.options());
    // parameters that have taken the same number of steps share one step tensor
    std::map<int64_t, std::vector<torch::Tensor>> by_step;
    for (const auto& p : with_grads(group)) {
      State& s = state_of<State>(states, p);
      if (!s.exp_avg().defined()) {
        s.exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s.exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (o.amsgrad()) s.max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      }
      s.step(s.step() + 1);
      by_step[s.step()].push_back(p);
    }
    for (auto& [step, params] : by_step) {
      std::vector<torch::Tensor> grads, avgs, sqs, maxs, steps;
      const torch::Tensor step_t =
          torch::full({}, static_cast<double>(step), torch::TensorOptions().dtype(torch::kFloat).device(params[0].device()));
      for (const auto& p : params) {
        State& s = state_of<State>(states, p);
        grads.push_back(p.grad());
        avgs.push_back(s.exp_avg());
        sqs.push_back(s.exp_avg_sq());
        if (o.amsgrad()) maxs.push_back(s.max_exp_avg_sq());
        steps.push_back(step_t);
      }
      fused(params, grads, avgs, sqs, maxs, steps, o);
    }
  }
}

}  // namespace

torch::Tensor FusedSGD::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> fresh, fresh_grads, fresh_bufs, going, going_grads, going_bufs;
    for (const auto& p : with_grads(group)) {
      if (o.momentum() == 0) {
        going.push_back(p);
        going_grads.push_back(p.grad());
        continue;
      }
      auto& s = state_of<torch::optim::SGDParamState>(state_, p);
      const bool first = !s.momentum_buffer().defined();
      if (first) s.momentum_buffer(torch::empty_like(p, torch::MemoryFormat::Preserve));
      (first ? fresh : going).push_back(p);
      (first ? fresh_grads : going_grads).push_back(p.grad());
      (first ? fresh_bufs : going_bufs).push_back(s.momentum_buffer());
    }
    // the first step copies the gradient into the momentum buffer, as SGD does
    if (!fresh.empty())
      at::_fused_sgd_(fresh, fresh_grads, fresh_bufs, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                      /*maximize=*/false, /*is_first_step=*/true);
    if (!going.empty())
      at::_fused_sgd_(going, going_grads, going_bufs, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                      /*maximize=*/false, /*is_first_step=*/false);
  }
  return loss;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
      *this, state_, [](auto& p, auto& g, auto& m, auto& v, auto& mx, auto& st, const torch::optim::AdamOptions& o) {
        at::_fused_adam_(p, g, m, v, mx, st, o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(),
                         o.eps(), o.amsgrad(), /*maximize=*/false);
      });
  return loss;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode grad(true);
    loss = closure();
  }
  adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      *this, state_, [](auto& p, auto& g, auto& m, auto& v, auto& mx, auto& st, const torch::optim::AdamWOptions& o) {
        at::_fused_adamw_(p, g, m, v, mx, st, o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(),
                          o.eps(), o.amsgrad(), /*maximize=*/false);
      });
  return loss;
}

}  // namespace saturate

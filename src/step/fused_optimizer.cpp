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

/// The capturable mode's tensor of group `g` (made on `device` from `initial` the first time).
torch::Tensor& group_tensor(std::vector<torch::Tensor>& v, size_t g, const torch::Device& device, double initial) {
  if (v.size() <= g) v.resize(g + 1);
  if (!v[g].defined()) v[g] = torch::full({}, initial, torch::TensorOptions().dtype(torch::kFloat).device(device));
  return v[g];
}

/// What capturable mode needs of the optimizer object (its protected members, passed in).
struct Capture {
  bool on;
  bool capturing;
  std::vector<torch::Tensor>& lr;
  std::vector<torch::Tensor>& steps;
};

/// Adam and AdamW share their state and update, apart from how weight decay enters. `fused`
/// gets (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr tensor or
/// undefined, options).
template <typename Options, typename State, typename Fused>
void adam_step(torch::optim::Optimizer& opt, StateMap& states, Capture c, Fused fused) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    auto& group = opt.param_groups()[g];
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
      by_step[s.step()].push_back(p);
      s.step(s.step() + 1);  // in capturable mode, bookkeeping only: the device count is the truth
    }
    if (by_step.empty()) continue;
    torch::Tensor lr_t, group_step;
    if (c.on) {
      const torch::Device device = by_step.begin()->second[0].device();
      lr_t = group_tensor(c.lr, g, device, o.lr());
      if (!c.capturing) lr_t.fill_(o.lr());
      group_step = group_tensor(c.steps, g, device, static_cast<double>(by_step.begin()->first));
      group_step.add_(1);
    }
    for (auto& [taken, params] : by_step) {
      std::vector<torch::Tensor> grads, avgs, sqs, maxs, steps;
      const torch::Tensor step_t =
          c.on ? group_step
               : torch::full({}, static_cast<double>(taken + 1),
                             torch::TensorOptions().dtype(torch::kFloat).device(params[0].device()));
      for (const auto& p : params) {
        State& s = state_of<State>(states, p);
        grads.push_back(p.grad());
        avgs.push_back(s.exp_avg());
        sqs.push_back(s.exp_avg_sq());
        if (o.amsgrad()) maxs.push_back(s.max_exp_avg_sq());
        steps.push_back(step_t);
      }
      fused(params, grads, avgs, sqs, maxs, steps, lr_t, o);
    }
  }
}

template <typename Options, typename State>
void copy_steps_to_host(torch::optim::Optimizer& opt, StateMap& states, const std::vector<torch::Tensor>& steps) {
  for (size_t g = 0; g < opt.param_groups().size() && g < steps.size(); ++g) {
    if (!steps[g].defined()) continue;
    const auto n = static_cast<int64_t>(steps[g].item<double>());
    for (const auto& p : opt.param_groups()[g].params()) {
      auto it = states.find(p.unsafeGetTensorImpl());
      if (it != states.end()) static_cast<State&>(*it->second).step(n);
    }
  }
}

template <typename Options>
void refresh(torch::optim::Optimizer& opt, std::vector<torch::Tensor>& lr) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < opt.param_groups().size() && g < lr.size(); ++g)
    if (lr[g].defined()) lr[g].fill_(static_cast<const Options&>(opt.param_groups()[g].options()).lr());
}

torch::Tensor run_closure(const torch::optim::Optimizer::LossClosure& closure) {
  if (!closure) return {};
  torch::AutoGradMode grad(true);
  return closure();
}

}  // namespace

torch::Tensor FusedSGD::step(LossClosure closure) {
  torch::Tensor loss = run_closure(closure);
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < param_groups().size(); ++g) {
    auto& group = param_groups()[g];
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
    if (fresh.empty() && going.empty()) continue;
    torch::Tensor lr_t;
    if (capturable_) {
      lr_t = group_tensor(lr_, g, (fresh.empty() ? going : fresh)[0].device(), o.lr());
      if (!capturing_) lr_t.fill_(o.lr());
    }
    // the first step copies the gradient into the momentum buffer, as SGD does
    const auto run = [&](auto& params, auto& grads, auto& bufs, bool first) {
      if (params.empty()) return;
      if (lr_t.defined())
        at::_fused_sgd_(params, grads, bufs, o.weight_decay(), o.momentum(), lr_t, o.dampening(), o.nesterov(),
                        /*maximize=*/false, first);
      else
        at::_fused_sgd_(params, grads, bufs, o.weight_decay(), o.momentum(), o.lr(), o.dampening(), o.nesterov(),
                        /*maximize=*/false, first);
    };
    run(fresh, fresh_grads, fresh_bufs, true);
    run(going, going_grads, going_bufs, false);
  }
  return loss;
}

void FusedSGD::refresh_lr() { refresh<torch::optim::SGDOptions>(*this, lr_); }

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::Tensor loss = run_closure(closure);
  adam_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
      *this, state_, Capture{capturable_, capturing_, lr_, steps_},
      [](auto& p, auto& g, auto& m, auto& v, auto& mx, auto& st, const torch::Tensor& lr,
         const torch::optim::AdamOptions& o) {
        const double b1 = std::get<0>(o.betas()), b2 = std::get<1>(o.betas());
        if (lr.defined())
          at::_fused_adam_(p, g, m, v, mx, st, lr, b1, b2, o.weight_decay(), o.eps(), o.amsgrad(), false);
        else
          at::_fused_adam_(p, g, m, v, mx, st, o.lr(), b1, b2, o.weight_decay(), o.eps(), o.amsgrad(), false);
      });
  return loss;
}

void FusedAdam::refresh_lr() { refresh<torch::optim::AdamOptions>(*this, lr_); }

void FusedAdam::sync_host_state() {
  copy_steps_to_host<torch::optim::AdamOptions, torch::optim::AdamParamState>(*this, state_, steps_);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::Tensor loss = run_closure(closure);
  adam_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
      *this, state_, Capture{capturable_, capturing_, lr_, steps_},
      [](auto& p, auto& g, auto& m, auto& v, auto& mx, auto& st, const torch::Tensor& lr,
         const torch::optim::AdamWOptions& o) {
        const double b1 = std::get<0>(o.betas()), b2 = std::get<1>(o.betas());
        if (lr.defined())
          at::_fused_adamw_(p, g, m, v, mx, st, lr, b1, b2, o.weight_decay(), o.eps(), o.amsgrad(), false);
        else
          at::_fused_adamw_(p, g, m, v, mx, st, o.lr(), b1, b2, o.weight_decay(), o.eps(), o.amsgrad(), false);
      });
  return loss;
}

void FusedAdamW::refresh_lr() { refresh<torch::optim::AdamWOptions>(*this, lr_); }

void FusedAdamW::sync_host_state() {
  copy_steps_to_host<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(*this, state_, steps_);
}

}  // namespace saturate

#include "train/oom_guard.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "core/failed_backward.h"
#include "saturate/core/oom.h"

namespace saturate {
namespace {

/// Rows, or real tokens when padded token targets (-100) make the rows unequal.
double weight_of(const torch::Tensor& targets) {
  if (targets.dim() >= 2 && targets.scalar_type() == torch::kLong)
    return static_cast<double>(targets.ne(-100).sum().item<int64_t>());
  return static_cast<double>(targets.size(0));
}

}  // namespace

OomGuard::OomGuard(std::function<torch::Tensor(const Batch&)> loss, torch::optim::Optimizer& optimizer)
    : loss_(std::move(loss)), optimizer_(optimizer) {
  if (!loss_) throw UsageError("loss", "is empty: give a function returning a batch's mean loss");
}

double OomGuard::run(const Batch& batch, int64_t micro) {
  const int64_t rows = batch.inputs.size(0);
  const double total = weight_of(batch.targets);
  if (total <= 0) throw UsageError("batch", "has no target to score (all -100): nothing to train on");
  double loss_sum = 0;
  for (int64_t start = 0; start < rows; start += micro) {
    const int64_t n = std::min(micro, rows - start);
    const Batch part = n == rows ? batch : Batch{batch.inputs.slice(0, start, start + n), batch.targets.slice(0, start, start + n)};
    const double w = weight_of(part.targets);
    if (w == 0) continue;
    torch::Tensor loss = loss_(part);
    if (n != rows) loss = loss * (w / total);
    loss.backward();
    loss_sum += loss.detach().item<double>();
  }
  return loss_sum;
}

double OomGuard::step(const Batch& batch) {
  const int64_t rows = batch.inputs.size(0);
  const int64_t length = batch.inputs.dim() >= 2 && batch.inputs.scalar_type() == torch::kLong ? batch.inputs.size(1) : 1;
  int64_t micro = memory_.micro_for(rows, length);
  double loss = 0;
  while (true) {
    optimizer_.zero_grad(/*set_to_none=*/true);
    try {
      loss = run(batch, micro);
      break;
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
    }
    // the failed attempt's graph died with the exception; its partial gradients go too
    release_failed_backward();
    optimizer_.zero_grad(/*set_to_none=*/true);
    const int64_t smaller = memory_.after_oom(rows, length, micro);
    if (smaller == 0)
      throw RuntimeFailure(fmt::format("out of memory with a micro-batch of 1 (length {}): give the step more memory "
                                       "or shorter items",
                                       length));
    if (on_backoff) on_backoff(memory_.backoffs().back());
    micro = smaller;
  }
  memory_.after_success(rows, length, micro);
  optimizer_.step();
  optimizer_.zero_grad(/*set_to_none=*/true);
  last_micro_ = micro;
  return loss;
}

}  // namespace saturate

#include "saturate/monitor/launch_counter.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include <ATen/record_function.h>
#include <torch/torch.h>

namespace saturate {
namespace {

std::atomic<int64_t> g_ops{0};

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction&) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

/// One round of the calibration: a chain of minimal ops, its backward and an update.
void tiny_round(torch::Tensor& w, const torch::Tensor& x) {
  torch::Tensor y = x;
  for (int i = 0; i < 8; ++i) y = torch::relu(y * w + w);
  y.sum().backward();
  torch::NoGradGuard no_grad;
  w.sub_(w.grad(), 1e-6);
  w.mutable_grad() = torch::Tensor();
}

}  // namespace

OpCounter::~OpCounter() {
  if (running()) stop();
}

void OpCounter::start() {
  if (running()) return;
  g_ops.store(0);
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&count_op).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

int64_t OpCounter::stop() {
  if (!running()) return 0;
  at::removeCallback(handle_);
  handle_ = 0;
  return g_ops.load();
}

double per_op_overhead_us() {
  static std::once_flag once;
  static double us = 0;
  std::call_once(once, [] {
    torch::Tensor w = torch::full({1, 1}, 0.5, torch::requires_grad());
    const torch::Tensor x = torch::ones({1, 1});
    constexpr int kRounds = 20;
    tiny_round(w, x);  // first-call costs (kernels, autograd) out of the measurement
    OpCounter counter;
    counter.start();
    for (int r = 0; r < kRounds; ++r) tiny_round(w, x);
    const int64_t ops = std::max<int64_t>(1, counter.stop());
    double best_us = 1e300;
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kRounds; ++r) tiny_round(w, x);
      best_us = std::min(best_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    us = best_us / static_cast<double>(ops);
  });
  return us;
}

}  // namespace saturate

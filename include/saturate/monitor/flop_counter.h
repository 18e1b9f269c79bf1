// Implements: FLOPs counted from the operators a step dispatches, for models whose architecture
// is not known here (TorchScript files, a user's own step in C++ or Python). While a counter is
// alive, every matrix product (mm, addmm, bmm, baddbmm), convolution (forward and backward) and
// fused attention kernel (forward and backward) that this thread dispatches, and the autograd
// engine runs for it, adds 2 FLOPs per multiply-add computed from its input shapes, as PyTorch's
// FlopCounterMode counts. Composite operators (linear, matmul, conv2d,
// scaled_dot_product_attention) are not counted themselves: the products they call are.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace saturate {

class FlopCounter {
 public:
  /// Starts counting on this thread. Throws RuntimeFailure when another counter is alive.
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  double total_flops() const;
  /// FLOPs by operator name ("aten::mm", "aten::convolution_backward", ...).
  std::map<std::string, double> flops_by_operator() const;

  /// Called by the dispatcher's callback (internal).
  void add(const char* op, double flops);

 private:
  mutable std::mutex mu_;
  std::map<std::string, double> by_op_;
  double total_ = 0;
  uint64_t handle_ = 0;
};

}  // namespace saturate

// Implements: FLOPs counted from the operators a step dispatches, for models whose architecture
// is not known here (TorchScript files, a user's own step in C++ or Python). While a counter is
// alive, every matrix product (mm, addmm, bmm, baddbmm), convolution (forward and backward) and
// fused attention kernel (forward and backward) that this thread dispatches, and the autograd
// engine runs for it, adds 2 FLOPs per multiply-add computed from its input shapes, as PyTorch's
// FlopCounterMode counts. Composite operators (linear, matmul, conv2d,
// scaled_dot_product_attention) are not counted themselves: the products they call are. A
// counted operator is counted once: the counted ones it calls in turn (a bf16 product that a CPU
// runs as another product, the math attention's bmm) add nothing. A checkpointed segment's
// recomputation in the backward is counted apart (recompute_flops): MFU counts the model's FLOPs
// once, HFU the hardware's (PaLM's split). A user's Python torch.utils.checkpoint is not seen.
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

  /// The model's FLOPs: each operator of the step once (PaLM's "model FLOPs", MFU's numerator).
  double total_flops() const;
  /// FLOPs of checkpointed segments run again in the backward (recomputing_checkpoint): hardware
  /// FLOPs beyond the model's (HFU counts total + these). Not in total_flops or by operator.
  double recompute_flops() const;
  /// FLOPs by operator name ("aten::mm", "aten::convolution_backward", ...).
  std::map<std::string, double> flops_by_operator() const;
  /// The model's FLOPs by the dtype the products ran in ("fp32", "bf16", "fp16", "fp64"; the
  /// operator's first tensor argument's: under autocast the cast inputs).
  std::map<std::string, double> flops_by_dtype() const;
  /// The dtype most of the model's FLOPs ran in ("" before any): the precision its GEMM peak is
  /// measured in, for an MFU of the arithmetic the step did.
  std::string dominant_dtype() const;

  /// Called by the dispatcher's callback (internal).
  void add(const char* op, double flops, bool recompute = false, const char* dtype = "");

 private:
  mutable std::mutex mu_;
  std::map<std::string, double> by_op_;
  std::map<std::string, double> by_dtype_;
  double total_ = 0;
  double recompute_ = 0;
  uint64_t handle_ = 0;
};

}  // namespace saturate

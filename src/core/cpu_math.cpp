#include "saturate/core/cpu_math.h"

#include <mutex>

#include <torch/torch.h>

namespace saturate {

void start_cpu_math_libraries() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::InferenceMode no_autograd;
    // 8 numbers: far under the parallel grain, so this thread alone makes the first calls; float
    // and double, as each has its own functions. The results are dropped.
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor x = torch::full({8}, 0.5, torch::TensorOptions().dtype(dtype));
      (void)x.sqrt();
      (void)x.rsqrt();
      (void)x.exp();
      (void)x.log();
      (void)x.tanh();
      (void)x.erf();
      (void)x.sin();
    }
  });
}

}  // namespace saturate

#include "saturate/step/rng_state.h"

#include <mutex>

#include <ATen/Context.h>
#include <torch/cuda.h>

namespace saturate {
namespace {

// Note [Acquire lock when using random generators] in ATen: state reads and writes hold the mutex.
torch::Tensor state_of(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_state_of(at::Generator gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

RngStates capture_rng_states(const c10::Device& device) {
  RngStates s;
  s.cpu = state_of(at::detail::getDefaultCPUGenerator());
  if (device.is_cuda()) {
    const auto count = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
    for (c10::DeviceIndex i = 0; i < count; ++i)
      s.cuda.push_back(state_of(at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i))));
  }
  return s;
}

void restore_rng_states(const RngStates& states) {
  if (states.cpu.defined()) set_state_of(at::detail::getDefaultCPUGenerator(), states.cpu);
  if (states.cuda.empty()) return;
  const auto count = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
  for (c10::DeviceIndex i = 0; i < count && static_cast<size_t>(i) < states.cuda.size(); ++i)
    set_state_of(at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, i)),
                 states.cuda[static_cast<size_t>(i)]);
}

}  // namespace saturate

// Implements: the states of the random generators a training run draws from: the CPU generator
// and, when the run uses CUDA, every CUDA device's default generator (dropout and random
// initialisation on a GPU draw from those, as torch.cuda.get_rng_state_all() saves them).
#pragma once
#include <vector>

#include <c10/core/Device.h>
#include <torch/types.h>

namespace saturate {

struct RngStates {
  torch::Tensor cpu;                ///< the CPU generator's state (a uint8 tensor)
  std::vector<torch::Tensor> cuda;  ///< CUDA device i's generator state; empty off CUDA
};

/// The CPU generator's state, plus every CUDA device's when `device` is a CUDA device.
RngStates capture_rng_states(const c10::Device& device);

/// Puts the generators back to `states`. CUDA states for devices this process does not have
/// are ignored (a run resumed on fewer GPUs keeps the states of the devices it has).
void restore_rng_states(const RngStates& states);

}  // namespace saturate

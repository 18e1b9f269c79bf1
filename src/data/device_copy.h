// Implements (private): moving a host batch to a CUDA device without stalling the host.
#pragma once
#include <utility>

#include <torch/types.h>

namespace saturate::data {

/// Non-blocking copies of pinned host tensors on a side stream; the device's current stream
/// waits for them with an event (so compute queued before keeps running during the copy), and
/// the results are marked as used on the current stream for the caching allocator.
/// Only built when LibTorch has CUDA (device_copy_cuda.cpp).
std::pair<torch::Tensor, torch::Tensor> copy_to_cuda(const torch::Tensor& inputs, const torch::Tensor& targets,
                                                     const torch::Device& device);

}  // namespace saturate::data

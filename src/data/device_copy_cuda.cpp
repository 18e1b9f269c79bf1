#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "data/device_copy.h"

namespace saturate::data {

std::pair<torch::Tensor, torch::Tensor> copy_to_cuda(const torch::Tensor& inputs, const torch::Tensor& targets,
                                                     const torch::Device& device) {
  c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  torch::Tensor in, tg;
  {
    c10::cuda::CUDAStreamGuard stream_guard(side);
    in = inputs.to(device, /*non_blocking=*/true);
    tg = targets.to(device, /*non_blocking=*/true);
  }
  at::cuda::CUDAEvent copied;
  copied.record(side);
  copied.block(compute);
  // allocated on the side stream, used and freed on the compute stream.
  in.record_stream(compute);
  tg.record_stream(compute);
  return {in, tg};
}

}  // namespace saturate::data

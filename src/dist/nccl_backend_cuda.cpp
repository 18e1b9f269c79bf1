// The NCCL backend of the process group (CUDA builds with NCCL's header; see dist/process_group.h).
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <c10/cuda/CUDAFunctions.h>

namespace saturate {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout, int device_index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  // bind the communicator to this rank's GPU now, so the first collective does not guess it
  backend->setBoundDeviceId(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_index)));
  return backend;
}

}  // namespace saturate

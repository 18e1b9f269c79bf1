// The GPU's name for describe_device (device.h), from the CUDA device properties.
#include <ATen/cuda/CUDAContext.h>

#include "core/cuda_device_name.h"

namespace saturate {
std::string cuda_device_name(c10::DeviceIndex index) { return at::cuda::getDeviceProperties(index)->name; }
}  // namespace saturate

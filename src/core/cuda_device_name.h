// Private: the CUDA side of device.h (the GPU's name), built only when LibTorch has CUDA.
#pragma once
#include <string>

#include <c10/core/Device.h>

namespace saturate {
std::string cuda_device_name(c10::DeviceIndex index);
}

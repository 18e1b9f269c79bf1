// Private: the CUDA side of memory_meter.h, built only when LibTorch has CUDA.
#pragma once
#include <memory>

#include "saturate/core/memory_meter.h"

namespace saturate {
std::unique_ptr<MemoryMeter> make_cuda_memory_meter(c10::DeviceIndex index);
}

// Private: the CUDA allocation recorder (recorder_cuda.cpp, compiled when LibTorch has CUDA).
#pragma once
#include <memory>

#include <c10/core/Device.h>

#include "saturate/memory/recorder.h"

namespace saturate {
std::unique_ptr<AllocationRecorder> make_cuda_allocation_recorder(c10::DeviceIndex index);
}  // namespace saturate

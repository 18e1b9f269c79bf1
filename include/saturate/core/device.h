// Implements: --device auto|cpu|cuda|cuda:N, and a one-line description of the device.
#pragma once
#include <string>

#include <c10/core/Device.h>

namespace saturate {

/// "auto" picks cuda:0 when a GPU is present, else cpu. Throws UsageError for an unknown
/// spelling and RuntimeFailure for a GPU that is not there.
c10::Device resolve_device(const std::string& spec);

/// "cpu (2 threads)" or "cuda:0 (NVIDIA H200, 139.8 GiB)".
std::string describe_device(const c10::Device& device);

/// The GPU's name ("NVIDIA H200"); "" for the CPU.
std::string device_name(const c10::Device& device);

/// Whether LibTorch sees at least one CUDA device.
bool cuda_available();

}  // namespace saturate

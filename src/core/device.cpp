#include "saturate/core/device.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <ATen/Parallel.h>

#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "saturate/core/units.h"
#ifdef SATURATE_WITH_CUDA
#include "core/cuda_device_name.h"
#endif

namespace saturate {

bool cuda_available() { return torch::cuda::is_available(); }

c10::Device resolve_device(const std::string& spec) {
  const auto usage = [&] {
    return UsageError("device", fmt::format("unknown value '{}' (expected auto, cpu, cuda or cuda:N)", spec));
  };
  if (spec == "auto") return cuda_available() ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
  // torch spells the process's one CPU device "cpu:0" too (str(torch.device) under torchrun)
  if (spec == "cpu" || spec == "cpu:0") return c10::Device(c10::DeviceType::CPU);
  if (spec.rfind("cuda", 0) != 0) throw usage();
  int index = 0;
  if (spec.size() > 4) {
    if (spec[4] != ':' || spec.size() == 5 || spec.size() > 8) throw usage();
    for (size_t i = 5; i < spec.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(spec[i]))) throw usage();
    index = std::stoi(spec.substr(5));
  }
  const int count = cuda_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (count == 0)
    throw RuntimeFailure(fmt::format("`device` {}: no CUDA GPU is visible to this process; use `device` cpu "
                                     "(or auto), or check CUDA_VISIBLE_DEVICES and the driver", spec));
  if (index >= count)
    throw RuntimeFailure(fmt::format("`device` {}: only {} CUDA device(s) visible (cuda:0..cuda:{})", spec,
                                     count, count - 1));
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
}

std::string describe_device(const c10::Device& device) {
  if (device.is_cpu()) return fmt::format("cpu ({} threads)", at::get_num_threads());
  auto meter = make_memory_meter(device);
  return fmt::format("{} ({}{})", device.str(), device_name(device).empty() ? "" : device_name(device) + ", ",
                     format_bytes(meter->capacity_bytes()));
}

std::string device_name(const c10::Device& device) {
#ifdef SATURATE_WITH_CUDA
  if (device.is_cuda()) return cuda_device_name(device.has_index() ? device.index() : 0);
#endif
  return "";
}

}  // namespace saturate

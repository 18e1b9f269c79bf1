#include "saturate/core/build_info.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <torch/version.h>

#include "saturate_build_info.h"  // generated at build time (cmake/build_info.cmake)

namespace saturate {

namespace {

std::string compiler() {
#if defined(__clang__)
  return fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

std::string cuda_runtime_version() {
  try {
    const auto& hooks = at::detail::getCUDAHooks();
    const long v = hooks.versionCUDART();  // e.g. 13000; the stub without CUDA throws
    if (v <= 0) return "";
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  } catch (...) {
    return "";
  }
}

}  // namespace

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = SATURATE_BUILD_VERSION;
    b.git_commit = SATURATE_BUILD_GIT_COMMIT;
    b.build_type = SATURATE_BUILD_TYPE;
    b.compiler = compiler();
    b.sanitizers = SATURATE_BUILD_SANITIZERS;
    b.torch_version = TORCH_VERSION;
    b.cuda_version = cuda_runtime_version();
    return b;
  }();
  return info;
}

HostInfo host_info() {
  HostInfo h;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) h.cpu_name = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  h.cpu_cores = online > 0 ? static_cast<int>(online) : static_cast<int>(std::thread::hardware_concurrency());
  return h;
}

}  // namespace saturate

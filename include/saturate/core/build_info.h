// Implements: what a report says about where it was made: this build of saturate (version,
// git commit, build type, compiler, LibTorch and CUDA versions) and the host (name, CPU model,
// cores). The version and commit come from the build (cmake/build_info.cmake writes them at
// each build, so a commit without reconfiguring still shows).
#pragma once
#include <string>

namespace saturate {

struct BuildInfo {
  std::string version;       ///< "0.1.0" (CMake's project version)
  std::string git_commit;    ///< short hash, "+dirty" with uncommitted changes; "unknown" outside git
  std::string build_type;    ///< "Release", "Debug", ...
  std::string compiler;      ///< "GCC 12.2.0"
  std::string sanitizers;    ///< "address,undefined" in a sanitizer build, else ""
  std::string torch_version; ///< LibTorch's, "2.11.0"
  std::string cuda_version;  ///< the CUDA runtime LibTorch was built with ("13.0"), "" without CUDA
};
const BuildInfo& build_info();

struct HostInfo {
  std::string hostname;
  std::string cpu_name;  ///< /proc/cpuinfo's model name ("" when unknown)
  int cpu_cores = 0;     ///< online logical CPUs
};
HostInfo host_info();

}  // namespace saturate

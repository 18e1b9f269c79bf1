// A fake libnvidia-ml for the tests: the same C symbols as NVML with fixed readings, so that
// saturate's real dlopen loader runs against it. Two GPUs; this process is listed on GPU 0
// with 1 GiB. $FAKE_NVML_INIT_RESULT makes nvmlInit_v2 fail with that code.
#include <unistd.h>

#include <cstdlib>

extern "C" {

struct nvmlDevice_st {
  unsigned int index;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

static nvmlDevice_st g_devices[2] = {{0}, {1}};
static int g_initialized = 0;

int nvmlInit_v2() {
  if (const char* rc = std::getenv("FAKE_NVML_INIT_RESULT")) return std::atoi(rc);
  ++g_initialized;
  return 0;
}
int nvmlShutdown() {
  --g_initialized;
  return 0;
}
const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_st** device) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &g_devices[index];
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_st* device, char* name, unsigned int length) {
  const char* n = device->index == 0 ? "Fake GPU 0" : "Fake GPU 1";
  unsigned int i = 0;
  for (; n[i] && i + 1 < length; ++i) name[i] = n[i];
  name[i] = '\0';
  return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_st* device, nvmlUtilization_t* u) {
  u->gpu = device->index == 0 ? 42 : 7;
  u->memory = 17;
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_st*, nvmlMemory_t* m) {
  m->total = 80ULL << 30;
  m->used = 10ULL << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_st*, unsigned int* milliwatts) {
  *milliwatts = 250500;
  return 0;
}
int nvmlDeviceGetClockInfo(nvmlDevice_st*, int type, unsigned int* mhz) {
  *mhz = type == 1 ? 1980 : 1000;  // 1: NVML_CLOCK_SM
  return 0;
}
int nvmlDeviceGetTemperature(nvmlDevice_st*, int, unsigned int* c) {
  *c = 55;
  return 0;
}
/// Two processes on GPU 0 (this one with 1 GiB, pid 1 with 2 GiB); answers "insufficient
/// size" first when the caller's array is too small, as NVML does.
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_st* device, unsigned int* count, nvmlProcessInfo_t* infos) {
  const unsigned int n = device->index == 0 ? 2 : 0;
  if (*count < n) {
    *count = n;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = n;
  if (n) {
    infos[0] = {static_cast<unsigned int>(getpid()), 1ULL << 30, 0, 0};
    infos[1] = {1u, 2ULL << 30, 0, 0};
  }
  return 0;
}

}  // extern "C"

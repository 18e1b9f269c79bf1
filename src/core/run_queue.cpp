#include "core/run_queue.h"

#include <cstdio>

namespace saturate {

double run_queue_wait_ms() {
  // "<ns on the CPU> <ns waiting on a run queue> <time slices>"
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  unsigned long long on_cpu_ns = 0, waiting_ns = 0;
  const int read = std::fscanf(f, "%llu %llu", &on_cpu_ns, &waiting_ns);
  std::fclose(f);
  return read == 2 ? static_cast<double>(waiting_ns) / 1e6 : -1;
}

}  // namespace saturate

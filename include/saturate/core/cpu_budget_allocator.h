// Implements: a byte-counting wrapper around LibTorch's CPU allocator with a budget.
// Installed with c10::SetCPUAllocator before any CPU tensor exists, it sees every CPU tensor
// byte (parameters, gradients, optimizer state, activations, autograd buffers) and throws
// c10::OutOfMemoryError when an allocation would pass the budget, as the CUDA caching
// allocator does when the device is full. Not seen: pinned host memory, oneDNN/BLAS scratch
// buffers, autograd graph nodes, tensors made with from_blob.
#pragma once
#include <cstdint>

namespace saturate {

struct CpuMemoryCounters {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t budget_bytes = 0;  ///< 0: no budget
  int64_t failed_allocations = 0;
};

/// Installs the counting allocator (idempotent). Call first thing in main().
void install_cpu_budget_allocator();
bool cpu_budget_allocator_installed();

CpuMemoryCounters cpu_memory_counters();
/// 0 removes the budget.
void set_cpu_budget_bytes(int64_t bytes);
void reset_cpu_peak();

}  // namespace saturate

// Implements: planning for a GPU that is not here (seed B10). One training step's allocations are
// recorded at two batch sizes on whatever device is here (the CPU included); each allocation's
// size is a line in the batch size through the two; the step is replayed at any batch through a
// model of the target's allocator (allocator_model.h) to predict its peak, and the largest batch
// that fits the card (and the target fraction of it) is found by bisection. A prediction, never
// a measurement: kernels that exist only on the GPU (cuDNN/cuBLAS workspaces, fused kernels)
// are covered by stated constants. No LibTorch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/memory/allocator_model.h"
#include "saturate/memory/events.h"

namespace saturate {

/// Device memory a CUDA process loses before its first tensor (context, kernels), outside the
/// caching allocator: a typical value for CUDA 12/13 with lazy module loading.
constexpr int64_t kCudaContextBytes = int64_t{512} << 20;
/// cuBLAS workspace, allocated through the caching allocator on the first matmul (Hopper size).
constexpr int64_t kCudaWorkspaceBytes = int64_t{32} << 20;

struct GpuCard {
  std::string name;
  int64_t memory_bytes = 0;  ///< total memory as nvidia-smi and torch report it
};
/// rtx4090, a100-40gb, a100-80gb, h100-80gb, h200.
const std::vector<GpuCard>& known_gpu_cards();

struct PlanTarget {
  std::string name;  ///< the card, or the size as given
  int64_t capacity_bytes = 0;
};
/// A card name or a size ("24GiB"); throws UsageError naming --plan-for otherwise.
PlanTarget parse_plan_target(const std::string& text);

struct TraceOp {
  bool alloc = true;
  uint32_t id = 0;    ///< allocations are numbered in order; a free names its allocation
  int64_t bytes = 0;
};

struct AllocationTrace {
  int64_t batch = 0;
  /// Tensors live before the step (parameters, buffers), one entry each.
  std::vector<int64_t> resident_bytes;
  std::vector<TraceOp> ops;
};

/// The trace of a log: ops in order; frees of memory made before the log are dropped.
/// `resident_tensor_bytes` lists the tensors live before the log; what the log says was live
/// beyond their sum is added as one more resident entry.
AllocationTrace trace_from_log(const MemoryEventLog& log, int64_t batch, std::vector<int64_t> resident_tensor_bytes);

/// True when `a` and `b` have the same ops in the same order (sizes may differ).
bool traces_align(const AllocationTrace& a, const AllocationTrace& b);
/// The trace at `batch`: every size on the line through `a` and `b`. Throws RuntimeFailure when
/// the traces do not align.
AllocationTrace interpolate_trace(const AllocationTrace& a, const AllocationTrace& b, int64_t batch);

struct ReplayResult {
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  bool oom = false;
};
/// Replays `t` through `kind` (capacity 0: unlimited); the CUDA model first allocates the
/// resident tensors and the cuBLAS workspace.
ReplayResult replay_trace(const AllocationTrace& t, AllocatorKind kind, int64_t capacity_bytes = 0);

struct PlanOptions {
  AllocatorKind allocator = AllocatorKind::kCudaCaching;
  int64_t capacity_bytes = 0;    ///< the card's memory
  double target_fraction = 0.9;  ///< the recommended batch's share of the capacity
  int64_t context_bytes = -1;    ///< -1: kCudaContextBytes for CUDA, 0 for exact
  int64_t batch_limit = int64_t{1} << 24;
};

struct PlanResult {
  std::string target;
  AllocatorKind allocator = AllocatorKind::kCudaCaching;
  int64_t capacity_bytes = 0;
  double target_fraction = 0;
  int64_t target_bytes = 0;       ///< target_fraction x capacity
  int64_t context_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t max_batch = 0;          ///< 0: batch 1 is predicted not to fit
  int64_t recommended_batch = 0;
  int64_t predicted_peak_bytes = 0;      ///< allocator peak (reserved) at recommended_batch
  int64_t predicted_max_peak_bytes = 0;  ///< allocator peak (reserved) at max_batch
  bool batch_limited = false;     ///< the search stopped at PlanOptions::batch_limit
  std::vector<int64_t> traced_batches;
  std::string device_here;
  std::string method;
};

/// Predicts max and recommended batches from two aligned traces.
PlanResult plan_batch(const AllocationTrace& a, const AllocationTrace& b, const PlanOptions& options);

nlohmann::json plan_json(const PlanResult& p);

}  // namespace saturate

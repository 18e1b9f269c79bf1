// Implements: the network between the ranks, measured at the start of a multi-rank run (issue 45):
// the all-reduce's latency (a 4-byte all-reduce) and bandwidth (one of up to 4 MiB), as
// nccl-tests defines them: algbw = bytes / time, busbw = algbw x 2(n-1)/n (what each link
// carries in a ring all-reduce). From them, the time the gradients' all-reduce should take.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>

namespace saturate {

class DistGroup;

struct NetworkMeasure {
  int world_size = 1;
  int64_t bytes = 0;             ///< the size the bandwidth was measured at
  double allreduce_ms = 0;       ///< median all-reduce of `bytes`
  double latency_ms = 0;         ///< median all-reduce of 4 bytes
  double algbw_bytes_per_s = 0;  ///< bytes / (allreduce_ms - latency_ms)
  double busbw_bytes_per_s = 0;  ///< algbw x 2(n-1)/n
  /// The same float32 values all-reduced in bf16 (rounded, all-reduced, copied back: what DDP's
  /// compress_bf16 does), median ms; 0 when not measured.
  double compressed_allreduce_ms = 0;
  /// ||bf16 result - float32 result|| / ||float32 result|| on normal random gradients (measured).
  double compression_error = 0;
  /// The same all-reduce of `bytes` while this rank computes beside it (matrix products on the
  /// device until it completes), median ms: what a DDP bucket sent while the backward still runs
  /// takes. On a CPU the two share the cores; on a GPU the wire and the kernels share the card.
  double beside_compute_ms = 0;
  /// beside_compute_ms / allreduce_ms, at least 1 (1 when not measured).
  double overlap_slowdown() const;
  /// allreduce_ms / compressed_allreduce_ms (1.9: the compressed all-reduce takes 1/1.9 the time).
  double compression_speedup() const {
    return compressed_allreduce_ms > 0 ? allreduce_ms / compressed_allreduce_ms : 0;
  }
  /// `bytes` all-reduced in `buckets` all-reduces one after another (DDP's buckets), of which
  /// `overlapped_bytes` are sent while the backward still computes (every bucket but the last),
  /// at overlap_slowdown() times the time alone for as long as the backward computes beside
  /// them: `backward_beside_ms` after the first bucket is sent (unknown, the default: their
  /// whole flight). Alone they would take T = overlapped_bytes / algbw; beside computation for W
  /// ms at slowdown s they take T + min(T (s - 1), W (1 - 1/s)).
  double predicted_ms(int64_t bytes, int64_t buckets, int64_t overlapped_bytes = 0,
                      double backward_beside_ms = std::numeric_limits<double>::infinity()) const;
  /// `gradient_bytes` all-reduced as DDP sends them: a first bucket of `first_bucket_bytes`, then
  /// buckets of `bucket_bytes` (PyTorch's 1 MiB and 25 MiB by default); all but the last
  /// overlapped with the backward.
  double predicted_ddp_ms(int64_t gradient_bytes, int64_t bucket_bytes = int64_t{25} << 20,
                          int64_t first_bucket_bytes = int64_t{1} << 20) const;
};

/// A collective: every rank calls it. All-reduces float tensors on `device` (the group's: the
/// CPU for Gloo, the rank's GPU for NCCL): 2 warm-ups, then the median of `repeats` timed calls
/// (more on a fast link: as many as fit in 0.3 s, at most 40) of 4 bytes and of min(`bytes`,
/// 4 MiB); with `compressed`, that size in bf16 too. Each timed call comes right after 3 ms of
/// matrix products on the device, as a step's all-reduce follows its backward (one timed back to
/// back with the last is faster than any step sees).
NetworkMeasure measure_network(DistGroup& group, const c10::Device& device, int64_t bytes, bool compressed = false,
                               int repeats = 5);

nlohmann::json to_json(const NetworkMeasure& m);

/// "the network measured between the ranks: bus bandwidth 11.4 MB/s, latency 0.31 ms".
std::string network_summary(const NetworkMeasure& m);

}  // namespace saturate

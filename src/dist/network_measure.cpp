#include "saturate/dist/network_measure.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include <torch/cuda.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/statistics.h"
#include "saturate/dist/process_group.h"

namespace saturate {
namespace {


/// One all-reduce of `values` as DDP's hook runs it: in place, or (compressed) rounded to bf16,
/// all-reduced and copied back. `beside`: products of two matrices on the values' device, one
/// after another, until it completes (as the backward computes beside a bucket in flight).
void allreduce(DistGroup& group, at::Tensor& values, bool compressed, const at::Tensor* beside = nullptr) {
  std::vector<at::Tensor> wire{compressed ? values.to(at::kBFloat16) : values};
  auto work = group.c10d_group()->allreduce(wire);
  if (beside) {
    while (!work->isCompleted()) {
      (void)at::mm(*beside, *beside);
      if (beside->is_cuda()) torch::cuda::synchronize(beside->device().index());
    }
  }
  work->wait();
  if (compressed) values.copy_(wire[0]);
}

/// Matrix products on `device` for `ms` milliseconds: a training step's computation before its
/// gradients' all-reduce. On this 2-core VM an all-reduce timed back to back with the previous one
/// took 2.9-3.7 ms for 2.6 MiB, one right after 3 ms of computation 3.6-5.2 ms, and training's
/// one-bucket all-reduce (DDP sends it right after the backward) 3.9-4.4 ms, the last rank's.
constexpr double kComputeBeforeMs = 3;
void compute_for(double ms, const c10::Device& device) {
  const at::Tensor a = torch::ones({256, 256}, torch::TensorOptions().device(device));
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < until) {
    (void)at::mm(a, a);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  }
}

/// The median milliseconds of all-reduces of `elements` floats (after 2 warm-ups), each as the
/// last rank to start it saw it: the least time of any rank. The ranks leave the barrier before
/// each at slightly different times (on shared cores by up to a scheduler slice), and a rank that
/// starts early waits inside the all-reduce for the others; the last one does not. At least
/// `repeats`, and as many more as fit in kMeasureMs (at most kMostRepeats; the same count on every
/// rank, from the slowest rank's second warm-up): a fast link's all-reduce of a few ms moved 2x
/// between runs with 5 (the cores' scheduling), a slow link's 240 ms one does not. Every rank gets
/// the same number.
constexpr double kMeasureMs = 300;
constexpr int kMostRepeats = 40;
double time_allreduce(DistGroup& group, const c10::Device& device, int64_t elements, int repeats,
                      bool compressed = false, bool beside_compute = false) {
  at::Tensor t = torch::ones({std::max<int64_t>(1, elements)}, torch::TensorOptions().device(device));
  // a small product (128 x 128: about 4 MFLOP), so that the loop ends soon after the all-reduce
  const at::Tensor compute = beside_compute ? torch::ones({128, 128}, torch::TensorOptions().device(device)) : at::Tensor();
  std::vector<int64_t> ns;
  for (int i = 0; i < repeats + 2; ++i) {
    group.barrier();  // every rank starts together: the time is the collective's, not a late rank's
    compute_for(kComputeBeforeMs, device);  // as a step sends its gradients: after computing, not back to back
    const auto start = std::chrono::steady_clock::now();
    allreduce(group, t, compressed, beside_compute ? &compute : nullptr);
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (i >= 2) ns.push_back(elapsed.count());
    if (i == 1) {  // the count, from the second warm-up's slowest rank
      const double warm_ms = static_cast<double>(group.all_reduce_max({elapsed.count()})[0]) / 1e6;
      const double fit = warm_ms > 0 ? kMeasureMs / warm_ms : kMostRepeats;
      repeats = std::max(repeats, static_cast<int>(std::min<double>(kMostRepeats, fit)));
    }
  }
  const std::vector<int64_t> every = group.all_gather(ns);
  std::vector<double> ms;
  for (size_t i = 0; i < ns.size(); ++i) {
    int64_t least = every[i];
    for (int r = 1; r < group.world_size(); ++r) least = std::min(least, every[static_cast<size_t>(r) * ns.size() + i]);
    ms.push_back(static_cast<double>(least) / 1e6);
  }
  return median(ms);
}

}  // namespace

double NetworkMeasure::overlap_slowdown() const {
  return beside_compute_ms > 0 && allreduce_ms > 0 ? std::max(1.0, beside_compute_ms / allreduce_ms) : 1.0;
}

double NetworkMeasure::predicted_ms(int64_t b, int64_t buckets, int64_t overlapped_bytes,
                                    double backward_beside_ms) const {
  if (algbw_bytes_per_s <= 0) return 0;
  const int64_t overlapped = std::clamp<int64_t>(overlapped_bytes, 0, b);
  const double alone_ms = 1000.0 * static_cast<double>(b) / algbw_bytes_per_s;
  // the overlapped buckets' extra time beside the backward: their whole flight at the slowdown,
  // or what the backward's remaining computation slows (it ends; they go on alone)
  const double s = overlap_slowdown();
  const double overlapped_alone_ms = 1000.0 * static_cast<double>(overlapped) / algbw_bytes_per_s;
  double extra_ms = overlapped_alone_ms * (s - 1);
  if (s > 1 && backward_beside_ms < std::numeric_limits<double>::infinity())
    extra_ms = std::min(extra_ms, std::max(0.0, backward_beside_ms) * (1 - 1 / s));
  return static_cast<double>(std::max<int64_t>(1, buckets)) * latency_ms + alone_ms + extra_ms;
}

double NetworkMeasure::predicted_ddp_ms(int64_t gradient_bytes, int64_t bucket_bytes, int64_t first_bucket_bytes) const {
  const int64_t bucket = std::max<int64_t>(1, bucket_bytes);
  const int64_t first = std::min(std::max<int64_t>(1, first_bucket_bytes), bucket);
  const int64_t buckets = 1 + std::max<int64_t>(0, gradient_bytes - first + bucket - 1) / bucket;
  // the last bucket (the model's first parameters) is sent once the backward is done
  const int64_t rest = gradient_bytes - first;
  const int64_t last = buckets == 1 ? gradient_bytes : rest - (buckets - 2) * bucket;
  return predicted_ms(gradient_bytes, buckets, gradient_bytes - last);
}

/// The relative error of a bf16 all-reduce of normal random values (a seed per rank) against the
/// float32 one of the same values.
double compression_error(DistGroup& group, const c10::Device& device, int64_t elements) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234 + group.rank());
  at::Tensor values = at::randn({std::max<int64_t>(1, elements)}, gen, torch::TensorOptions()).to(device);
  at::Tensor exact = values.clone();
  allreduce(group, exact, false);
  allreduce(group, values, true);
  const double norm = exact.norm().item<double>();
  return norm > 0 ? (values - exact).norm().item<double>() / norm : 0;
}

NetworkMeasure measure_network(DistGroup& group, const c10::Device& device, int64_t bytes, bool compressed,
                               int repeats) {
  NetworkMeasure m;
  m.world_size = group.world_size();
  m.bytes = std::clamp<int64_t>(bytes, 4, int64_t{4} << 20);
  m.latency_ms = time_allreduce(group, device, 1, repeats);
  m.allreduce_ms = time_allreduce(group, device, m.bytes / 4, repeats);
  const double transfer_ms = std::max(1e-6, m.allreduce_ms - m.latency_ms);
  m.algbw_bytes_per_s = 1000.0 * static_cast<double>(m.bytes) / transfer_ms;
  m.busbw_bytes_per_s = m.algbw_bytes_per_s * 2.0 * (m.world_size - 1) / m.world_size;
  m.beside_compute_ms = time_allreduce(group, device, m.bytes / 4, repeats, false, true);
  if (compressed) {
    m.compressed_allreduce_ms = time_allreduce(group, device, m.bytes / 4, repeats, true);
    m.compression_error = compression_error(group, device, std::min<int64_t>(m.bytes / 4, int64_t{1} << 18));
  }
  return m;
}

std::string network_summary(const NetworkMeasure& m) {
  return fmt::format("the network measured between the ranks: bus bandwidth {:.3g} MB/s, latency {:.2f} ms",
                     m.busbw_bytes_per_s / 1e6, m.latency_ms);
}

nlohmann::json to_json(const NetworkMeasure& m) {
  nlohmann::json j = {{"world_size", m.world_size},
          {"measured_bytes", m.bytes},
          {"allreduce_ms", m.allreduce_ms},
          {"latency_ms", m.latency_ms},
          {"algbw_bytes_per_s", m.algbw_bytes_per_s},
          {"busbw_bytes_per_s", m.busbw_bytes_per_s},
          {"beside_compute_ms", m.beside_compute_ms},
          {"overlap_slowdown", m.overlap_slowdown()},
          {"method", "median of 5 to 40 all-reduces (as many as fit in 0.3 s) of 4 bytes (latency) and of the "
                     "measured bytes, after 2 warm-ups, each right after 3 ms of matrix products (as a step's all-reduce follows its backward) and the last rank to arrive's; algbw = bytes / (time - "
                     "latency), busbw = algbw x 2(n-1)/n (nccl-tests); beside_compute_ms: the same all-reduce while the "
                     "rank multiplies matrices until it completes, for the buckets sent during the backward"}};
  if (m.compressed_allreduce_ms > 0) {
    j["compressed_allreduce_ms"] = m.compressed_allreduce_ms;
    j["compression_speedup"] = m.compression_speedup();
    j["compression_error"] = m.compression_error;
  }
  return j;
}

}  // namespace saturate

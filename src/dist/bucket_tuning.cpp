#include "saturate/dist/bucket_tuning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "core/statistics.h"
#include "saturate/core/units.h"
#include "saturate/dist/process_group.h"

namespace saturate {

namespace {
using Clock = std::chrono::steady_clock;

void drop_gradients(const std::vector<torch::Tensor>& parameters) {
  for (const torch::Tensor& p : parameters)
    if (p.grad().defined()) p.mutable_grad().reset();  // mutable_grad is const: the tensor is shared
}
}  // namespace

const BucketCandidate& BucketTuning::default_candidate() const {
  for (const BucketCandidate& c : candidates)
    if (c.is_default) return c;
  throw InternalError("bucket tuning without its default candidate");
}

double BucketTuning::speedup() const {
  const double chosen_ms = chosen_candidate().step_ms;
  return chosen_ms > 0 ? default_candidate().step_ms / chosen_ms : 1.0;
}

std::vector<BucketCandidate> bucket_candidates(int64_t gradient_bytes, const DdpOptions& base) {
  constexpr int64_t kLeast = int64_t{64} << 10;
  std::vector<BucketCandidate> out;
  auto add = [&](int64_t first, int64_t bucket, bool is_default) {
    for (const BucketCandidate& c : out)
      if (c.first_bucket_bytes == first && c.bucket_bytes == bucket) return;
    BucketCandidate c;
    c.first_bucket_bytes = first;
    c.bucket_bytes = bucket;
    c.is_default = is_default;
    out.push_back(c);
  };
  add(base.first_bucket_bytes, base.bucket_bytes, true);
  const int64_t whole = std::max<int64_t>(gradient_bytes, 1);
  add(whole, whole, false);  // one bucket: the all-reduce after the whole backward
  for (const int64_t parts : {4, 16}) {
    const int64_t size = std::max(kLeast, whole / parts);
    add(size, size, false);
  }
  return out;
}

BucketTuning tune_buckets(const std::vector<torch::Tensor>& parameters, DistGroup& group, const DdpOptions& base,
                          const std::function<torch::Tensor()>& forward, BucketTuningOptions options) {
  if (options.rounds < 1 || options.timed_steps < 1)
    throw InternalError(fmt::format("bucket tuning: {} rounds of {} timed steps", options.rounds, options.timed_steps));
  const auto start = Clock::now();
  int64_t gradient_bytes = 0;
  for (const torch::Tensor& p : parameters)
    if (p.requires_grad()) gradient_bytes += static_cast<int64_t>(p.nbytes());
  BucketTuning t;
  t.min_speedup = options.min_speedup;
  // candidates that would build the same buckets are one candidate
  std::vector<BucketCandidate> all = bucket_candidates(gradient_bytes, base);
  std::vector<std::vector<std::vector<size_t>>> seen;
  for (BucketCandidate& c : all) {
    DdpOptions o = base;
    o.first_bucket_bytes = c.first_bucket_bytes;
    o.bucket_bytes = c.bucket_bytes;
    auto assignment = ddp_bucket_assignment(parameters, o);
    if (std::find(seen.begin(), seen.end(), assignment) != seen.end()) continue;
    c.buckets = static_cast<int64_t>(assignment.size());
    seen.push_back(std::move(assignment));
    t.candidates.push_back(c);
  }
  std::vector<std::vector<double>> times(t.candidates.size());
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t k = 0; k < t.candidates.size(); ++k) {
      // every other pass in reverse: no candidate is always the first after the network's measure
      const size_t i = round % 2 ? t.candidates.size() - 1 - k : k;
      DdpOptions o = base;
      o.first_bucket_bytes = t.candidates[i].first_bucket_bytes;
      o.bucket_bytes = t.candidates[i].bucket_bytes;
      DistributedDataParallel ddp(parameters, {}, group, o);
      std::vector<int64_t> ns;
      for (int step = 0; step <= options.timed_steps; ++step) {
        group.barrier();  // every rank starts the step together: its time is the slowest rank's
        const auto t0 = Clock::now();
        ddp.prepare_for_forward();
        ddp.backward(forward(), /*sync=*/true);
        const auto elapsed = Clock::now() - t0;
        drop_gradients(parameters);
        if (step > 0) ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
      }
      for (int64_t v : group.all_reduce_max(ns)) times[i].push_back(static_cast<double>(v) / 1e6);
      t.candidates[i].buckets = ddp.stats().buckets;
    }
  }
  for (size_t i = 0; i < t.candidates.size(); ++i) t.candidates[i].step_ms = median(times[i]);
  size_t best = 0, fallback = 0;
  for (size_t i = 0; i < t.candidates.size(); ++i) {
    if (t.candidates[i].step_ms < t.candidates[best].step_ms) best = i;
    if (t.candidates[i].is_default) fallback = i;
  }
  t.chosen = t.candidates[fallback].step_ms >= options.min_speedup * t.candidates[best].step_ms ? best : fallback;
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return t;
}

nlohmann::json to_json(const BucketTuning& t) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const BucketCandidate& c : t.candidates)
    candidates.push_back({{"first_bucket_bytes", c.first_bucket_bytes},
                          {"bucket_bytes", c.bucket_bytes},
                          {"buckets", c.buckets},
                          {"step_ms", c.step_ms},
                          {"default", c.is_default}});
  const BucketCandidate& c = t.chosen_candidate();
  return {{"by", "measured"},
          {"chosen", {{"first_bucket_bytes", c.first_bucket_bytes}, {"bucket_bytes", c.bucket_bytes}, {"buckets", c.buckets}}},
          {"default_kept", c.is_default},
          {"speedup", t.speedup()},
          {"min_speedup", t.min_speedup},
          {"seconds", t.seconds},
          {"candidates", candidates}};
}

std::string bucket_tuning_text(const BucketTuning& t) {
  const BucketCandidate& c = t.chosen_candidate();
  const BucketCandidate& d = t.default_candidate();
  std::string tried;
  for (const BucketCandidate& x : t.candidates)
    tried += fmt::format("{}{:.2f} ms with {}", tried.empty() ? "" : ", ", x.step_ms, x.buckets);
  const std::string sizes = fmt::format("a first bucket of {}, then {}", format_bytes(d.first_bucket_bytes),
                                        format_bytes(d.bucket_bytes));
  const std::string head =
      c.is_default ? fmt::format("{}, the default ({}; no other {:.2f}x faster)", c.buckets, sizes, t.min_speedup)
                   : fmt::format("{} of up to {} ({:.2f}x faster than the default: {})", c.buckets,
                                 format_bytes(c.bucket_bytes), t.speedup(), sizes);
  return fmt::format("{}: forward + synced backward {} bucket(s) (timed in {:.1f} s)", head, tried, t.seconds);
}

}  // namespace saturate

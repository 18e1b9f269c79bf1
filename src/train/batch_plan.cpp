#include "saturate/train/batch_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::string batch_arithmetic(int64_t micro_batch, int64_t accumulation, int world_size, int64_t global_batch,
                             const char* micro_word, const char* global_word) {
  const int world = std::max(1, world_size);
  const int64_t rank_batch = global_batch / world;
  const int64_t last = rank_batch - micro_batch * (accumulation - 1);
  if (last == micro_batch || accumulation < 1 || last <= 0 || last > micro_batch)
    return world > 1 ? fmt::format("{} {} x {} x {} ranks = {} {}", micro_word, micro_batch, accumulation, world,
                                   global_word, global_batch)
                     : fmt::format("{} {} x {} = {} {}", micro_word, micro_batch, accumulation, global_word, global_batch);
  const std::string steps = accumulation > 2 ? fmt::format("{} x {} + {}", micro_batch, accumulation - 1, last)
                                             : fmt::format("{} + {}", micro_batch, last);
  return world > 1 ? fmt::format("{} {} (a shorter last one) = {} per rank x {} ranks = {} {}", micro_word, steps,
                                 rank_batch, world, global_word, global_batch)
                   : fmt::format("{} {} (a shorter last one) = {} {}", micro_word, steps, global_word, global_batch);
}

std::string BatchPlan::text() const {
  return batch_arithmetic(micro_batch, accumulation, world_size, global_batch, "micro", "global");
}

int64_t rank_share(int64_t global_batch, int world_size) {
  if (world_size <= 1 || global_batch % world_size == 0) return global_batch / std::max(1, world_size);
  const int64_t below = global_batch / world_size * world_size, above = below + world_size;
  std::string fewer;
  for (int d = world_size - 1; d >= 1; --d)
    if (global_batch % d == 0) {
      fewer = std::to_string(d);
      break;
    }
  throw UsageError("global_batch",
                   fmt::format("{} is not divisible by the world size {} (each of the {} ranks trains on an equal "
                               "share); use a multiple of {}, e.g. {}{}, or start {} rank(s)",
                               global_batch, world_size, world_size, world_size,
                               below > 0 ? fmt::format("{} or ", below) : "", above, fewer));
}

void check_batch_request(const BatchRequest& r) {
  if (r.world_size < 1)
    throw UsageError("world_size", fmt::format("{} is not a positive number of ranks", r.world_size));
  if (r.micro_batch < 0)
    throw UsageError("micro_batch", fmt::format("{} is not a positive integer", r.micro_batch));
  if (r.accumulation < 0)
    throw UsageError("accumulation", fmt::format("{} is negative; give 1 or more micro-batches per step", r.accumulation));
  if (r.global_batch < 0)
    throw UsageError("global_batch", fmt::format("{} is negative; give the samples per optimizer step", r.global_batch));
  if (r.global_batch == 0) return;
  const int64_t share = rank_share(r.global_batch, r.world_size);
  const std::string of_ranks =
      r.world_size > 1 ? fmt::format(" ({} per rank of {})", share, r.world_size) : std::string();
  if (r.micro_batch > 0 && r.accumulation > 0 && r.micro_batch * r.accumulation != share)
    throw UsageError("global_batch", fmt::format("{}{} is not micro-batch {} x accumulation {} = {}; give two of the three",
                                                 r.global_batch, of_ranks, r.micro_batch, r.accumulation,
                                                 r.micro_batch * r.accumulation));
  if (r.micro_batch == 0 && r.accumulation > 0 && share % r.accumulation != 0)
    throw UsageError("accumulation", fmt::format("{} does not divide the global batch {}{}", r.accumulation,
                                                 r.global_batch, of_ranks));
}

int64_t micro_batch_limit(const BatchRequest& r) {
  if (r.global_batch == 0) return 0;
  const int64_t share = rank_share(r.global_batch, r.world_size);
  return r.accumulation > 0 ? share / r.accumulation : share;
}

BatchPlan plan_batches(const BatchRequest& r, int64_t micro_batch) {
  check_batch_request(r);
  if (micro_batch <= 0) throw UsageError("micro_batch", fmt::format("{} is not a positive integer", micro_batch));
  BatchPlan p;
  p.world_size = r.world_size;
  p.micro_batch = micro_batch;
  if (r.global_batch > 0) {
    p.rank_batch = rank_share(r.global_batch, r.world_size);
    p.micro_batch = std::min(p.micro_batch, p.rank_batch);
    p.accumulation = (p.rank_batch + p.micro_batch - 1) / p.micro_batch;
  } else {
    p.accumulation = r.accumulation > 0 ? r.accumulation : 1;
    p.rank_batch = p.micro_batch * p.accumulation;
  }
  p.global_batch = p.rank_batch * r.world_size;
  return p;
}

}  // namespace saturate

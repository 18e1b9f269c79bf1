#include "saturate/data/batch_plan.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_text.h"

namespace saturate {

namespace {

/// Whether `rank_batch` splits into `accumulation` micro-batches of `micro_batch` with a shorter
/// last one (its size in `last`).
bool shorter_last(int64_t micro_batch, int64_t accumulation, int64_t rank_batch, int64_t& last) {
  last = rank_batch - micro_batch * (accumulation - 1);
  return !(last == micro_batch || accumulation < 1 || last <= 0 || last > micro_batch);
}

/// "micro 16 x 3", or with a shorter last one "micro 16 x 2 + 10 (a shorter last one)".
std::string micro_steps_text(int64_t micro_batch, int64_t accumulation, int64_t rank_batch, const char* micro_word) {
  int64_t last = 0;
  if (!shorter_last(micro_batch, accumulation, rank_batch, last))
    return fmt::format("{} {} x {}", micro_word, micro_batch, accumulation);
  return accumulation > 2
             ? fmt::format("{} {} x {} + {} (a shorter last one)", micro_word, micro_batch, accumulation - 1, last)
             : fmt::format("{} {} + {} (a shorter last one)", micro_word, micro_batch, last);
}

}  // namespace

std::string batch_arithmetic(int64_t micro_batch, int64_t accumulation, int world_size, int64_t global_batch,
                             const char* micro_word, const char* global_word) {
  const int world = std::max(1, world_size);
  const int64_t rank_batch = global_batch / world;
  const std::string steps = micro_steps_text(micro_batch, accumulation, rank_batch, micro_word);
  int64_t last = 0;
  if (!shorter_last(micro_batch, accumulation, rank_batch, last))
    return world > 1 ? fmt::format("{} x {} ranks = {} {}", steps, world, global_word, global_batch)
                     : fmt::format("{} = {} {}", steps, global_word, global_batch);
  return world > 1 ? fmt::format("{} = {} per rank x {} ranks = {} {}", steps, rank_batch, world, global_word, global_batch)
                   : fmt::format("{} = {} {}", steps, global_word, global_batch);
}

std::string rank_batch_arithmetic(int64_t micro_batch, int64_t accumulation, int64_t rank_batch, int world_size,
                                  int64_t global_batch, const char* micro_word, const char* global_word) {
  const int world = std::max(1, world_size);
  if (rank_batch <= 0 || rank_batch * world == global_batch)
    return batch_arithmetic(micro_batch, accumulation, world_size, global_batch, micro_word, global_word);
  return fmt::format("{} = {} on this rank, of {} {} over {} ranks (unequal shares)",
                     micro_steps_text(micro_batch, accumulation, rank_batch, micro_word), rank_batch, global_word,
                     global_batch, world);
}

std::string BatchPlan::text() const {
  return rank_batch_arithmetic(micro_batch, accumulation, rank_batch, world_size, global_batch, "micro", "global");
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

std::optional<int64_t> global_batch_of(const BatchRequest& r) {
  if (r.global_batch || r.shares.empty()) return r.global_batch;
  int64_t sum = 0;
  for (int64_t s : r.shares) sum += s;
  return sum;
}

RankSlice rank_slice(int64_t global_batch, int rank, int world_size, const std::vector<int64_t>& shares) {
  if (shares.empty()) {
    const int64_t share = rank_share(global_batch, world_size);
    return {rank * share, share};
  }
  BatchRequest r;
  r.global_batch = global_batch;
  r.world_size = world_size;
  r.shares = shares;
  r.rank = rank;
  RankSlice slice;
  slice.count = rank_share(r);  // checks them
  for (int i = 0; i < rank; ++i) slice.offset += shares[static_cast<size_t>(i)];
  return slice;
}

int64_t rank_share(const BatchRequest& r) {
  if (r.shares.empty()) return rank_share(r.global_batch.value_or(0), r.world_size);
  if (static_cast<int64_t>(r.shares.size()) != r.world_size)
    throw UsageError("shares", fmt::format("{} values for {} ranks; give one share per rank (each rank's samples of "
                                           "every global batch)",
                                           r.shares.size(), r.world_size));
  int64_t sum = 0;
  for (size_t i = 0; i < r.shares.size(); ++i) {
    if (r.shares[i] < 1)
      throw UsageError("shares", fmt::format("rank {}'s share is {}; every rank needs 1 or more samples", i, r.shares[i]));
    sum += r.shares[i];
  }
  if (r.global_batch && *r.global_batch != sum)
    throw UsageError("shares", fmt::format("they add up to {}, not the global batch {}; give shares that sum to it, "
                                           "or leave `global_batch` out (the shares' sum is the global batch)",
                                           sum, *r.global_batch));
  if (r.accumulation)
    throw UsageError("accumulation", fmt::format("{}: with `shares` each rank's accumulation follows from its share "
                                                 "and micro-batch; leave `accumulation` out",
                                                 *r.accumulation));
  if (r.rank < 0 || r.rank >= r.world_size)
    throw UsageError("shares", fmt::format("rank {} of {} ranks has no share", r.rank, r.world_size));
  return r.shares[static_cast<size_t>(r.rank)];
}

SharesOption parse_shares(const std::string& text) {
  SharesOption o;
  if (text == "auto") {
    o.by_speed = true;
    return o;
  }
  if (text.empty()) return o;
  for (const std::string& item : split_list(text)) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > (int64_t{1} << 40))
      throw UsageError("shares", fmt::format("'{}' in '{}' is not a positive whole number of samples; give one per "
                                             "rank, e.g. 48,16 (or auto: by each rank's speed)",
                                             item, text));
    o.counts.push_back(v);
  }
  return o;
}

std::vector<int64_t> shares_by_speed(int64_t global_batch, const std::vector<double>& samples_per_s) {
  const auto ranks = static_cast<int64_t>(samples_per_s.size());
  if (ranks == 0 || global_batch < ranks)
    throw UsageError("shares", fmt::format("auto splits the global batch {} over {} ranks by speed; every rank needs "
                                           "at least one sample: give `global_batch` {} or more",
                                           global_batch, ranks, ranks));
  double total = 0;
  for (size_t r = 0; r < samples_per_s.size(); ++r) {
    if (!(samples_per_s[r] > 0) || !std::isfinite(samples_per_s[r]))
      throw RuntimeFailure(fmt::format("shares auto: rank {}'s speed measured {} samples/s; give `shares` by hand", r,
                                       samples_per_s[r]));
    total += samples_per_s[r];
  }
  // the floors of the exact split, then the largest remainders; a rank whose floor is 0 gets 1,
  // taken back from the largest share
  std::vector<int64_t> shares(samples_per_s.size(), 0);
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t r = 0; r < samples_per_s.size(); ++r) {
    const double exact = static_cast<double>(global_batch) * samples_per_s[r] / total;
    shares[r] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(exact)));
    given += shares[r];
    remainders.push_back({exact - static_cast<double>(shares[r]), r});  // below 0 where raised to 1
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < global_batch; ++i, ++given) ++shares[remainders[i % remainders.size()].second];
  for (; given > global_batch; --given) --*std::max_element(shares.begin(), shares.end());
  return shares;
}

void check_batch_request(const BatchRequest& r) {
  if (r.world_size < 1)
    throw UsageError("world_size", fmt::format("{} is not a positive number of ranks", r.world_size));
  if (r.micro_batch && *r.micro_batch < 1)
    throw UsageError("micro_batch", fmt::format("{} is not a positive integer; give 1 or more samples, or leave it to "
                                                "the search (auto)",
                                                *r.micro_batch));
  if (r.accumulation && *r.accumulation < 1)
    throw UsageError("accumulation", fmt::format("{} is not a positive integer; give 1 or more micro-batches per step, "
                                                 "or leave it out (it follows from the others)",
                                                 *r.accumulation));
  if (r.global_batch && *r.global_batch < 1)
    throw UsageError("global_batch", fmt::format("{} is not a positive integer; give the samples per optimizer step, "
                                                 "or leave it out (micro-batch x accumulation x ranks)",
                                                 *r.global_batch));
  if (!r.shares.empty()) {
    rank_share(r);  // one positive share per rank, their sum the global batch, no accumulation
    return;
  }
  if (!r.global_batch) return;
  const int64_t share = rank_share(*r.global_batch, r.world_size);
  const std::string of_ranks =
      r.world_size > 1 ? fmt::format(" ({} per rank of {})", share, r.world_size) : std::string();
  if (r.micro_batch && r.accumulation && *r.micro_batch * *r.accumulation != share)
    throw UsageError("global_batch", fmt::format("{}{} is not micro-batch {} x accumulation {} = {}; give two of the three",
                                                 *r.global_batch, of_ranks, *r.micro_batch, *r.accumulation,
                                                 *r.micro_batch * *r.accumulation));
  if (!r.micro_batch && r.accumulation && share % *r.accumulation != 0)
    throw UsageError("accumulation", fmt::format("{} does not divide the global batch {}{}", *r.accumulation,
                                                 *r.global_batch, of_ranks));
}

std::optional<int64_t> micro_batch_limit(const BatchRequest& r) {
  if (!r.shares.empty()) {  // the largest share: every rank's search caps at the same batch (they run in step)
    rank_share(r);
    int64_t largest = 0;
    for (int64_t s : r.shares) largest = std::max(largest, s);
    return largest;
  }
  if (!r.global_batch) return std::nullopt;
  const int64_t share = rank_share(*r.global_batch, r.world_size);
  return r.accumulation ? share / *r.accumulation : share;
}

BatchPlan plan_batches(const BatchRequest& r, int64_t micro_batch) {
  check_batch_request(r);
  if (micro_batch <= 0) throw UsageError("micro_batch", fmt::format("{} is not a positive integer", micro_batch));
  BatchPlan p;
  p.world_size = r.world_size;
  p.micro_batch = micro_batch;
  if (!r.shares.empty()) {
    p.rank_batch = rank_share(r);
    p.micro_batch = std::min(p.micro_batch, p.rank_batch);
    p.accumulation = (p.rank_batch + p.micro_batch - 1) / p.micro_batch;
    p.global_batch = *global_batch_of(r);
    return p;
  }
  if (r.global_batch) {
    p.rank_batch = rank_share(*r.global_batch, r.world_size);
    p.micro_batch = std::min(p.micro_batch, p.rank_batch);
    p.accumulation = (p.rank_batch + p.micro_batch - 1) / p.micro_batch;
  } else {
    p.accumulation = r.accumulation.value_or(1);
    p.rank_batch = p.micro_batch * p.accumulation;
  }
  p.global_batch = p.rank_batch * r.world_size;
  return p;
}

}  // namespace saturate

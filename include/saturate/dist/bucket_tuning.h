// Implements: DDP's gradient buckets tuned by measurement at a fixed batch (issue 45, `train
// --fast-paths auto|try` on several ranks). Small buckets start the all-reduce early and overlap
// it with the rest of the backward, at a latency per bucket; one bucket waits for the whole
// backward and pays the latency once. Which wins depends on the network, the model and the step,
// so each candidate is timed: forward and synced backward passes (no optimizer step) through a
// DDP built with its buckets, every rank together, the step's time the slowest rank's. PyTorch's
// default (a 1 MiB first bucket, then 25 MiB) is kept unless another is measured faster by a
// margin.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include "saturate/dist/ddp.h"

namespace saturate {

class DistGroup;

struct BucketTuningOptions {
  /// Passes over the candidates (interleaved, every other one in reverse order, so that a drift of
  /// the machine's speed or a first pass's cost hits each alike).
  int rounds = 2;
  /// Per candidate and pass: one warm-up step, then this many timed ones.
  int timed_steps = 3;
  /// A candidate replaces the default only when the default's median step takes at least this
  /// many times the candidate's.
  double min_speedup = 1.1;
};

struct BucketCandidate {
  int64_t first_bucket_bytes = 0;
  int64_t bucket_bytes = 0;
  int64_t buckets = 0;      ///< all-reduces per synced backward, as run
  double step_ms = 0;       ///< median forward + synced backward, the slowest rank's
  bool is_default = false;  ///< the `base` options' buckets
};

struct BucketTuning {
  std::vector<BucketCandidate> candidates;
  size_t chosen = 0;    ///< index into candidates
  double seconds = 0;   ///< the tuning's wall time
  double min_speedup = 0;
  const BucketCandidate& chosen_candidate() const { return candidates[chosen]; }
  const BucketCandidate& default_candidate() const;
  /// The default's median step / the chosen one's (1 when the default is kept).
  double speedup() const;
};

/// The candidates for `gradient_bytes` of trainable parameters: the default (`base`'s), one
/// bucket (no overlap), and buckets of a quarter and a sixteenth of the gradients (at least
/// 64 KiB); duplicates dropped.
std::vector<BucketCandidate> bucket_candidates(int64_t gradient_bytes, const DdpOptions& base);

/// A collective: every rank calls it with the same parameters and candidates. For each candidate,
/// builds DDP over `parameters` with `base`'s options and that candidate's buckets, and times
/// `forward()` (returns the loss of one micro-batch) and its synced backward; the gradients are
/// dropped after each step (the caller restores whatever else the passes changed). Every rank
/// gets the same numbers and the same choice. Throws what DDP throws (RuntimeFailure when a rank
/// is gone).
BucketTuning tune_buckets(const std::vector<torch::Tensor>& parameters, DistGroup& group, const DdpOptions& base,
                          const std::function<torch::Tensor()>& forward, BucketTuningOptions options = {});

nlohmann::json to_json(const BucketTuning& t);

/// "4 of up to 669.7 KiB (1.12x faster than the default: ...): forward + synced backward 4.81 ms
/// with 2, 5.29 ms with 1, 4.30 ms with 4 bucket(s) (timed in 0.2 s)".
std::string bucket_tuning_text(const BucketTuning& t);

}  // namespace saturate

// Implements: the threaded loader. N worker threads read, decode and augment samples into
// whole batches (in pinned host memory when the target is CUDA); a bounded window of
// `workers * prefetch` batches may be in flight ahead of the consumer; batches come out in
// order. Batch k of the stream is a pure function of (dataset, options, k): the same batches
// in the same order whatever the worker count. A batch may come in `parts` pieces (training's
// micro-batches): the window then holds pieces, not whole batches, and the pieces of batch k
// together are exactly batch k. The stream runs across epochs, reshuffling each
// one. Bad samples stop the stream with a DataError naming the file, offset and sample, raised
// on the consumer's thread when it reaches that batch, or are skipped and counted.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include <torch/types.h>

#include "saturate/data/augment.h"
#include "saturate/data/dataset.h"
#include "saturate/data/sampler.h"

namespace saturate {

struct LoaderOptions {
  /// Samples per batch.
  int64_t batch_size = 32;
  /// Worker threads. 0: the consumer's thread loads each batch when asked (no overlap).
  int workers = 2;
  /// Batches each worker may load ahead of the consumer (PyTorch's prefetch_factor); default 2.
  /// With `parts` > 1 the window counts pieces: `workers * prefetch` pieces in flight.
  int prefetch = 2;
  /// Each batch comes as this many consecutive pieces of near-equal size (the first
  /// `batch_size % parts` one sample larger), in order; 1: whole batches. next() then returns
  /// one piece (an empty one when all its samples were skipped), so a consumer that joins the
  /// pieces of a batch holds one batch and a window of pieces instead of a window of batches.
  int64_t parts = 1;
  /// Drop each epoch's last, partial batch (default: keep it).
  bool drop_last = false;
  /// Skip and count bad samples (default: stop with a DataError).
  bool skip_bad_samples = false;
  /// Seeds the per-epoch permutation and every augmentation choice.
  uint64_t seed = 0;
  /// Shuffling and rank sharding (see sampler.h).
  ShardOptions shard;
  /// Output sample shape [C, H, W]; empty: the dataset's.
  SampleShape shape;
  AugmentOptions augment;
  /// No crop, no flip (normalization still applies).
  bool augment_enabled = true;
  /// Labels must lie in [0, classes); 0: the dataset's class count.
  int64_t classes = 0;
  /// The stream's first batch: k starts a stream at batch k (epoch k / batches_per_epoch), the
  /// same batch a stream from 0 would give there. Training resumes with it.
  int64_t first_batch = 0;
  /// Where batches will be used: CUDA makes the host batches pinned (page-locked) memory.
  torch::Device device = torch::kCPU;
};

struct LoadedBatch {
  torch::Tensor inputs;           ///< [n, C, H, W] float32, on the host
  torch::Tensor targets;          ///< [n] int64
  std::vector<int64_t> indices;   ///< dataset index of each sample (tests, debugging)
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;
  int64_t part = 0;               ///< which piece of the batch (LoaderOptions::parts)
  double wait_ms = 0;             ///< how long next() blocked for this batch
  int64_t skipped = 0;            ///< bad samples left out of this batch
  std::vector<std::pair<int64_t, std::string>> skipped_samples;  ///< (dataset index, reason)
};

struct LoaderStats {
  int64_t batches = 0;
  int64_t samples = 0;
  double wait_ms_total = 0;
  /// Distinct samples skipped in the batches consumed so far (a sample skipped again in a later
  /// epoch counts once); the dataset's own open_skips come on top.
  SkipReport skipped;
};

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// The next batch (or piece of a batch) of the endless stream (epoch after epoch). Blocks
  /// while it is not ready.
  LoadedBatch next();
  /// True when next() would not block.
  bool ready();
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const LoaderOptions& options() const { return options_; }
  const SampleShape& shape() const { return options_.shape; }
  LoaderStats stats() const;

 private:
  struct Slot {
    LoadedBatch batch;
    std::exception_ptr error;
  };
  Slot produce(int64_t k);
  std::shared_ptr<const std::vector<int64_t>> order_for(int64_t epoch);
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  int64_t samples_per_epoch_ = 0;
  int64_t batches_per_epoch_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;  // a batch arrived
  std::condition_variable space_cv_;  // the consumer took one
  bool stop_ = false;
  int64_t claimed_ = 0;   // next batch a worker may start
  int64_t consumed_ = 0;  // next batch the consumer takes
  std::map<int64_t, Slot> done_;
  LoaderStats stats_;
  std::set<int64_t> skipped_indices_;

  std::mutex order_mutex_;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders_;

  std::vector<std::thread> threads_;
};

}  // namespace saturate

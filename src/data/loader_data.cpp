#include "data/loader_data.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "saturate/core/errors.h"

namespace saturate {

LoaderTrainData::LoaderTrainData(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  options_.drop_last = true;
  options_.first_batch = 0;
  loader_ = std::make_unique<Loader>(dataset_, options_);
  steps_per_epoch_ = loader_->batches_per_epoch();
  next_step_ = 0;
}

void LoaderTrainData::set_parts(int64_t parts) {
  parts = std::max<int64_t>(1, std::min(parts, options_.batch_size));
  if (parts == options_.parts) return;
  options_.parts = parts;
  next_step_ = -1;  // a new loader at the next batch (batch k of the stream is a pure function of k)
}

void LoaderTrainData::set_shares(const std::vector<int64_t>& shares) {
  const std::vector<int64_t>& before = options_.shard.shares;
  if (before.empty() || shares.size() != before.size() ||
      std::accumulate(shares.begin(), shares.end(), int64_t{0}) != std::accumulate(before.begin(), before.end(), int64_t{0}))
    throw InternalError(fmt::format("`data` {}: shares {} cannot replace {} (one per rank, the same global batch)",
                                    name(), fmt::join(shares, ","), fmt::join(before, ",")));
  options_.shard.shares = shares;
  options_.batch_size = shares.at(static_cast<size_t>(options_.shard.rank));
  options_.parts = std::min(options_.parts, options_.batch_size);
  next_step_ = -1;  // a new loader at the next batch: global batch k split by the new shares
}

Batch LoaderTrainData::batch_for_step(int64_t step) {
  if (step != next_step_) {
    // resume (or any jump): batch k of the stream is a pure function of k, start there.
    loader_.reset();
    LoaderOptions o = options_;
    o.first_batch = step;
    loader_ = std::make_unique<Loader>(dataset_, o);
  }
  next_step_ = step + 1;
  if (options_.parts == 1) {
    LoadedBatch b = loader_->next();
    last_wait_ms_ = b.wait_ms;
    return {std::move(b.inputs), std::move(b.targets)};
  }
  // the pieces of one batch, copied in order into the batch as each arrives (a piece is freed
  // before the next one is taken: the batch, one piece and the window are all that is held);
  // a batch whose samples were all skipped is left out, as the loader leaves out a whole one
  last_wait_ms_ = 0;
  while (true) {
    Batch joined;
    int64_t rows = 0;
    for (int64_t part = 0; part < options_.parts; ++part) {
      LoadedBatch b = loader_->next();
      last_wait_ms_ += b.wait_ms;
      const int64_t n = b.inputs.size(0);
      if (n == 0) continue;
      if (!joined.inputs.defined()) {  // pinned pieces (a CUDA run) join into pinned memory
        std::vector<int64_t> shape = b.inputs.sizes().vec();
        shape[0] = options_.batch_size;
        joined.inputs = torch::empty(shape, b.inputs.options().pinned_memory(b.inputs.is_pinned()));
        joined.targets = torch::empty({options_.batch_size}, b.targets.options().pinned_memory(b.targets.is_pinned()));
      }
      joined.inputs.narrow(0, rows, n).copy_(b.inputs);
      joined.targets.narrow(0, rows, n).copy_(b.targets);
      rows += n;
    }
    if (rows == 0) continue;
    if (rows < options_.batch_size) joined = {joined.inputs.narrow(0, 0, rows), joined.targets.narrow(0, 0, rows)};
    return joined;
  }
}

LoaderEvalData::LoaderEvalData(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  options_.augment_enabled = false;
  options_.shard.shuffle = false;
  options_.drop_last = false;
  options_.first_batch = 0;
}

void LoaderEvalData::restart() {
  loader_.reset();
  loader_ = std::make_unique<Loader>(dataset_, options_);
  left_ = loader_->batches_per_epoch();
}

std::optional<Batch> LoaderEvalData::next() {
  if (!loader_ || left_ == 0) return std::nullopt;
  --left_;
  LoadedBatch b = loader_->next();
  return Batch{std::move(b.inputs), std::move(b.targets)};
}

}  // namespace saturate

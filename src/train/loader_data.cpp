#include "saturate/train/loader_data.h"

namespace saturate {

LoaderTrainData::LoaderTrainData(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  options_.drop_last = true;
  options_.first_batch = 0;
  loader_ = std::make_unique<Loader>(dataset_, options_);
  steps_per_epoch_ = loader_->batches_per_epoch();
  next_step_ = 0;
}

Batch LoaderTrainData::batch_for_step(int64_t step) {
  if (step != next_step_) {
    // resume (or any jump): batch k of the stream is a pure function of k, start there.
    loader_.reset();
    LoaderOptions o = options_;
    o.first_batch = step;
    loader_ = std::make_unique<Loader>(dataset_, o);
  }
  LoadedBatch b = loader_->next();
  next_step_ = step + 1;
  last_wait_ms_ = b.wait_ms;
  return {std::move(b.inputs), std::move(b.targets)};
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

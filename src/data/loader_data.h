// Implements: the trainer's data from the threaded loader. Training reads global batches (the
// loader's batch is the global batch; the trainer splits it into micro-batches), so an OOM
// back-off changes the split, never the samples. With LoaderOptions::parts (the accumulation)
// the loader works in micro-batch pieces that are joined here: its window then holds
// `workers x prefetch` micro-batches, not global batches (issue 26: 4 prefetched global
// batches of 4096 took 61.4 MiB of a 64 MiB budget); the stream position is the step index, so a
// resumed run restarts the loader at exactly the batch it stopped before. Evaluation reads the
// test split in order, without augmentation.
#pragma once
#include <memory>

#include "saturate/data/loader.h"
#include "saturate/data/train_data.h"

namespace saturate {

class LoaderTrainData final : public TrainData {
 public:
  /// `options.batch_size` must be the global batch; drop_last is forced on (equal steps).
  LoaderTrainData(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  std::string name() const override { return dataset_->name(); }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  Batch batch_for_step(int64_t step) override;
  double last_wait_ms() const override { return last_wait_ms_; }
  /// At most the batch's rows; the loader restarts at the next batch asked for.
  void set_parts(int64_t parts) override;
  /// The shard's shares (LoaderOptions::shard.shares) anew; the loader restarts at the next batch.
  void set_shares(const std::vector<int64_t>& shares) override;
  const Loader* loader() const { return loader_.get(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  std::unique_ptr<Loader> loader_;
  int64_t next_step_ = -1;
  int64_t steps_per_epoch_ = 0;
  double last_wait_ms_ = 0;
};

class LoaderEvalData final : public EvalData {
 public:
  LoaderEvalData(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  void restart() override;
  std::optional<Batch> next() override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  std::unique_ptr<Loader> loader_;
  int64_t left_ = 0;
};

}  // namespace saturate

#include "saturate/data/train_data.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

void TrainData::set_shares(const std::vector<int64_t>& shares) {
  throw InternalError(fmt::format("`data` {}: {} shares given to data that is not split by shares", name(),
                                  shares.size()));
}

TensorTrainData::TensorTrainData(torch::Tensor inputs, torch::Tensor targets, int64_t global_batch, std::string name)
    : inputs_(std::move(inputs)), targets_(std::move(targets)), global_batch_(global_batch), name_(std::move(name)) {
  if (global_batch_ <= 0 || inputs_.size(0) < global_batch_)
    throw UsageError(fmt::format("global batch {} does not fit {} samples", global_batch_, inputs_.size(0)));
}

Batch TensorTrainData::batch_for_step(int64_t step) {
  const int64_t start = (step % steps_per_epoch()) * global_batch_;
  return {inputs_.slice(0, start, start + global_batch_), targets_.slice(0, start, start + global_batch_)};
}

}  // namespace saturate

#include "saturate/data/loader.h"

#include <chrono>

#include "formats.h"
#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/core/oom.h"
#include "saturate/data/data_error.h"

namespace saturate {

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (!dataset_) throw UsageError("the loader needs a dataset");
  // no decoded image may take more than its share of the CPU budget (checked on its header)
  data::set_image_memory_budget(cpu_memory_counters().budget_bytes);
  if (options_.batch_size < 1) throw UsageError("batch size " + std::to_string(options_.batch_size) + ": need at least 1");
  if (options_.workers < 0) throw UsageError("`workers` " + std::to_string(options_.workers) + ": need 0 or more");
  if (options_.prefetch < 1) throw UsageError("`prefetch` " + std::to_string(options_.prefetch) + ": need at least 1");
  if (options_.parts < 1 || options_.parts > options_.batch_size)
    throw UsageError("parts", std::to_string(options_.parts) + " pieces of a batch of " +
                                  std::to_string(options_.batch_size) + ": give 1 to the batch size");
  if (options_.shape.empty()) options_.shape = dataset_->shape();
  if (options_.classes <= 0) options_.classes = dataset_->classes();
  if (!options_.augment_enabled) {
    options_.augment.crop_padding = 0;
    options_.augment.horizontal_flip = false;
  }
  // the shard size does not depend on the epoch: compute it once.
  samples_per_epoch_ = static_cast<int64_t>(epoch_order(dataset_->size(), options_.seed, 0, options_.shard).size());
  batches_per_epoch_ = options_.drop_last ? samples_per_epoch_ / options_.batch_size
                                          : (samples_per_epoch_ + options_.batch_size - 1) / options_.batch_size;
  if (batches_per_epoch_ == 0)
    throw UsageError("`drop_last` with batch " + std::to_string(options_.batch_size) + " leaves no batch: rank " +
                     std::to_string(options_.shard.rank) + " has only " + std::to_string(samples_per_epoch_) +
                     " samples of " + dataset_->name());
  if (options_.first_batch < 0)
    throw UsageError("first batch " + std::to_string(options_.first_batch) + ": need 0 or more");
  claimed_ = consumed_ = options_.first_batch * options_.parts;
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  space_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<const std::vector<int64_t>> Loader::order_for(int64_t epoch) {
  std::lock_guard<std::mutex> lock(order_mutex_);
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_order(dataset_->size(), options_.seed, epoch, options_.shard));
  // epochs behind every batch in flight are no longer needed.
  while (!orders_.empty() && orders_.begin()->first < epoch - 1) orders_.erase(orders_.begin());
  orders_[epoch] = order;
  return order;
}

Loader::Slot Loader::produce(int64_t piece) {
  Slot slot;
  LoadedBatch& b = slot.batch;
  const int64_t k = piece / options_.parts;
  b.part = piece % options_.parts;
  b.epoch = k / batches_per_epoch_;
  b.batch_in_epoch = k % batches_per_epoch_;
  try {
    const auto order = order_for(b.epoch);
    const int64_t batch_begin = b.batch_in_epoch * options_.batch_size;
    const int64_t batch_end = std::min<int64_t>(batch_begin + options_.batch_size, static_cast<int64_t>(order->size()));
    // piece j of n rows in p parts: the first n % p pieces one row larger
    const int64_t rows = batch_end - batch_begin, base = rows / options_.parts, larger = rows % options_.parts;
    const int64_t begin = batch_begin + b.part * base + std::min(b.part, larger);
    const int64_t n = base + (b.part < larger ? 1 : 0);
    const SampleShape& s = options_.shape;
    auto host = torch::TensorOptions().dtype(torch::kFloat32);
    if (options_.device.is_cuda()) host = host.pinned_memory(true);
    b.inputs = torch::empty({n, s.channels, s.height, s.width}, host);
    b.targets = torch::empty({n}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(options_.device.is_cuda()));
    float* in = b.inputs.data_ptr<float>();
    int64_t* tg = b.targets.data_ptr<int64_t>();
    thread_local Image image;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = (*order)[static_cast<size_t>(begin + i)];
      try {
        const int64_t label = dataset_->get(index, s.channels, image);
        if (label < 0 || label >= options_.classes)
          throw DataError(dataset_->locate(index), -1,
                          "label " + std::to_string(label) + " is out of range [0, " +
                              std::to_string(options_.classes) + ") of the model's classes");
        const uint64_t seed = mix64(options_.seed ^ mix64(static_cast<uint64_t>(b.epoch) * 0x10001u + 7) ^
                                    mix64(static_cast<uint64_t>(index)));
        augment_into(image, s, options_.augment, seed, in + kept * s.numel());
        tg[kept] = label;
        b.indices.push_back(index);
        ++kept;
      } catch (const DataError& e) {
        const std::string where = "sample " + std::to_string(index) + " of " + dataset_->name() + ": ";
        if (!options_.skip_bad_samples) throw DataError(e.file(), e.offset(), where + e.problem());
        ++b.skipped;
        b.skipped_samples.emplace_back(index, where + e.what());
      }
    }
    if (kept < n) {
      b.inputs = b.inputs.narrow(0, 0, kept);
      b.targets = b.targets.narrow(0, 0, kept);
    }
  } catch (const DataError&) {
    slot.error = std::current_exception();
  } catch (const std::exception& e) {
    if (is_out_of_memory(e)) {  // the probe records it as an OOM, as it would any other
      slot.error = std::current_exception();
      return slot;
    }
    slot.error = std::make_exception_ptr(RuntimeFailure("data loader, batch " + std::to_string(b.batch_in_epoch) +
                                                        " of epoch " + std::to_string(b.epoch) + " of " +
                                                        dataset_->name() + ": " + e.what()));
  }
  return slot;
}

void Loader::worker_loop() {
  const int64_t window = static_cast<int64_t>(options_.workers) * options_.prefetch;
  while (true) {
    int64_t k;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_cv_.wait(lock, [&] { return stop_ || claimed_ < consumed_ + window; });
      if (stop_) return;
      k = claimed_++;
    }
    Slot slot = produce(k);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.emplace(k, std::move(slot));
    }
    ready_cv_.notify_all();
  }
}

bool Loader::ready() {
  if (threads_.empty()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return done_.count(consumed_) > 0;
}

LoadedBatch Loader::next() {
  using clock = std::chrono::steady_clock;
  while (true) {
    const auto start = clock::now();
    Slot slot;
    if (threads_.empty()) {
      slot = produce(consumed_++);
    } else {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_cv_.wait(lock, [&] { return done_.count(consumed_) > 0; });
      auto it = done_.find(consumed_);
      slot = std::move(it->second);
      done_.erase(it);
      ++consumed_;
    }
    space_cv_.notify_all();
    const double wait_ms = std::chrono::duration<double, std::milli>(clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.wait_ms_total += wait_ms;
    if (slot.error) std::rethrow_exception(slot.error);
    for (const auto& [index, reason] : slot.batch.skipped_samples)
      if (skipped_indices_.insert(index).second) stats_.skipped.add(reason);
    // every sample of it was skipped: a whole batch is left out, a piece comes empty (its batch's
    // other pieces may not be)
    if (slot.batch.indices.empty() && options_.parts == 1) continue;
    slot.batch.wait_ms = wait_ms;
    if (slot.batch.part == options_.parts - 1) ++stats_.batches;
    stats_.samples += static_cast<int64_t>(slot.batch.indices.size());
    return std::move(slot.batch);
  }
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace saturate

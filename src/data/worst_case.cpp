#include "saturate/data/worst_case.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

WorstCaseOrder::WorstCaseOrder(std::vector<int64_t> sizes, const std::string& option) : sizes_(std::move(sizes)) {
  if (sizes_.empty())
    throw UsageError(option, "holds no items: the worst-case batches are built from the data's items; give a "
                             "non-empty dataset");
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] < 1)
      throw UsageError(option, fmt::format("item {} has size {}; an item's size (its length, its elements) must be "
                                           "at least 1: drop empty items or give item_size a positive count",
                                           i, sizes_[i]));
  order_.resize(sizes_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  std::stable_sort(order_.begin(), order_.end(),
                   [this](int64_t a, int64_t b) { return sizes_[static_cast<size_t>(a)] > sizes_[static_cast<size_t>(b)]; });
}

int64_t WorstCaseOrder::largest_size() const { return sizes_[static_cast<size_t>(order_.front())]; }

int64_t WorstCaseOrder::median_size() const { return sizes_[static_cast<size_t>(order_[order_.size() / 2])]; }

std::vector<int64_t> WorstCaseOrder::worst_items(int64_t batch) const {
  if (batch < 1) throw UsageError("batch", fmt::format("{} is not a positive batch size", batch));
  std::vector<int64_t> out(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) out[static_cast<size_t>(i)] = order_[static_cast<size_t>(i % items())];
  return out;
}

std::vector<int64_t> WorstCaseOrder::median_items(int64_t batch) const {
  if (batch < 1) throw UsageError("batch", fmt::format("{} is not a positive batch size", batch));
  const int64_t n = items();
  // a window of `batch` positions of the cost order centred on the median, clamped to the data
  int64_t first = n / 2 - batch / 2;
  first = std::max<int64_t>(0, std::min(first, n - batch));
  std::vector<int64_t> out(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) out[static_cast<size_t>(i)] = order_[static_cast<size_t>((first + i) % n)];
  return out;
}

}  // namespace saturate

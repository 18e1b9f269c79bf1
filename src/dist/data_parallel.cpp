#include "saturate/dist/data_parallel.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

DataParallelModel::DataParallelModel(std::unique_ptr<Model> master, std::vector<std::unique_ptr<Model>> replicas,
                                     std::vector<torch::Device> devices)
    : master_(std::move(master)), replicas_(std::move(replicas)), devices_(std::move(devices)) {
  if (devices_.empty() || replicas_.size() + 1 != devices_.size())
    throw UsageError(fmt::format("DataParallel: {} replica(s) for {} device(s); give one replica per device after the "
                                 "first (the master runs on the first)",
                                 replicas_.size(), devices_.size()));
  const auto mine = master_->named_tensors();
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const auto theirs = replicas_[i]->named_tensors();
    bool same = theirs.size() == mine.size();
    for (size_t k = 0; same && k < mine.size(); ++k) same = mine[k].second.sizes() == theirs[k].second.sizes();
    if (!same)
      throw UsageError(fmt::format("DataParallel: replica {} is not the model '{}' (its parameters differ in number or "
                                   "shape); build each replica from the same model spec",
                                   i + 1, master_->name()));
    replicas_[i]->to(devices_[i + 1]);
  }
  master_->to(devices_[0]);
}

void DataParallelModel::refresh_replicas() {
  torch::NoGradGuard no_grad;
  const auto mine = master_->named_tensors();
  for (auto& r : replicas_) {
    const auto theirs = r->named_tensors();
    for (size_t k = 0; k < mine.size(); ++k) theirs[k].second.copy_(mine[k].second, /*non_blocking=*/true);
  }
}

torch::Tensor DataParallelModel::forward(const torch::Tensor& input) {
  if (replicas_.empty()) return master_->forward(input.to(devices_[0]));
  refresh_replicas();
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(devices_.size()), input.size(0));
  const std::vector<torch::Tensor> chunks = input.chunk(n, 0);
  std::vector<torch::Tensor> outputs;
  outputs.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    Model& m = i == 0 ? *master_ : *replicas_[i - 1];
    outputs.push_back(m.forward(chunks[i].to(devices_[i], /*non_blocking=*/true)).to(devices_[0]));
  }
  return torch::cat(outputs, 0);
}

void DataParallelModel::reduce_gradients() {
  torch::NoGradGuard no_grad;
  auto mine = master_->parameters();
  for (auto& r : replicas_) {
    auto theirs = r->parameters();
    for (size_t k = 0; k < mine.size(); ++k) {
      torch::Tensor g = theirs[k].grad();
      if (!g.defined()) continue;  // the replica got no chunk (batch smaller than the devices)
      if (mine[k].grad().defined()) mine[k].mutable_grad().add_(g.to(mine[k].device()));
      else mine[k].mutable_grad() = g.to(mine[k].device()).clone();
      theirs[k].mutable_grad() = torch::Tensor();
    }
  }
}

void DataParallelModel::train(bool on) {
  master_->train(on);
  for (auto& r : replicas_) r->train(on);
}

void DataParallelModel::to(const torch::Device& device) {
  if (device != devices_[0])
    throw UsageError(fmt::format("DataParallel: the master model lives on {}, the first of its devices; it cannot move "
                                 "to {}",
                                 devices_[0].str(), device.str()));
  master_->to(device);
}

}  // namespace saturate

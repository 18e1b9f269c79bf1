// Implements: DataParallel (seed M7): one process, the model replicated over several devices.
// Each forward copies the master model's parameters and buffers into the replicas, splits the
// batch along dim 0 into one chunk per device, runs the chunks (the master itself takes the
// first, on devices[0]) and gathers the outputs on devices[0]; autograd carries the gradients
// back through the cross-device copies to each replica, and reduce_gradients() adds the
// replicas' gradients into the master's, so the optimizer (over the master's parameters) sees the
// gradient of the whole batch. The same code runs over CPU "devices", which is how it is tested
// without GPUs; `saturate train --parallel dp` uses the visible GPUs.
// Replicas are made once (the model's architecture again) and refreshed each forward, as
// torch.nn.DataParallel replicates each forward. Batch-norm statistics: the master keeps the
// first chunk's, as with torch.nn.DataParallel.
#pragma once
#include <memory>
#include <vector>

#include "saturate/models/model.h"
#include "saturate/train/trainer.h"

namespace saturate {

class DataParallelModel final : public Model {
 public:
  /// `replicas[i]` (the master's architecture) runs on devices[i + 1]; the master on devices[0].
  /// Throws UsageError when the counts do not match or a replica's parameters differ in shape.
  DataParallelModel(std::unique_ptr<Model> master, std::vector<std::unique_ptr<Model>> replicas,
                    std::vector<torch::Device> devices);

  torch::Tensor forward(const torch::Tensor& input) override;
  /// Adds the replicas' gradients into the master's (on devices[0]) and clears theirs.
  void reduce_gradients();

  std::vector<torch::Tensor> parameters() override { return master_->parameters(); }
  void train(bool on) override;
  void to(const torch::Device& device) override;
  std::string name() const override { return master_->name(); }
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() override { return master_->named_tensors(); }
  void save(const std::string& path) override { master_->save(path); }
  std::shared_ptr<torch::nn::Module> module() override { return master_->module(); }
  const std::vector<torch::Device>& devices() const { return devices_; }
  Model& master() { return *master_; }

 private:
  void refresh_replicas();

  std::unique_ptr<Model> master_;
  std::vector<std::unique_ptr<Model>> replicas_;
  std::vector<torch::Device> devices_;
};

/// The Trainer's hook for DataParallel: backward, then the replicas' gradients into the master's.
class DataParallelSync final : public StepSync {
 public:
  explicit DataParallelSync(DataParallelModel& model) : model_(model) {}
  void backward(const torch::Tensor& loss, bool last) override {
    loss.backward();
    model_.reduce_gradients();
  }
  bool communicates() const override { return false; }

 private:
  DataParallelModel& model_;
};

}  // namespace saturate

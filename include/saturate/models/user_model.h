// Implements: a user's own torch::nn module as a model saturate trains: the Trainer's
// accumulation to a global batch, OOM back-off, checkpoints and exact resume, and the search,
// on a module saturate did not build. The forward is the user's (a model with several inputs
// unpacks them from the batch's one tensor); the loss is the user's too (Workload::set_loss).
//
//   saturate::UserModel m;
//   m.module = net.ptr();                        // parameters, buffers, train/eval, save
//   m.forward = [&](const torch::Tensor& x) { return net->forward(x); };
//   m.sample_shape = {1, 28, 28};
//   m.classes = 10;
//   saturate::Workload w(saturate::build_user_model(m), device, saturate::OptimizerKind::kAdam, 1e-3);
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "saturate/models/zoo.h"

namespace saturate {

struct UserModel {
  std::string name = "user model";
  /// The module whose parameters train and whose parameters and buffers checkpoints hold.
  std::shared_ptr<torch::nn::Module> module;
  /// The batch's inputs [batch, sample_shape...] to the output the loss takes.
  std::function<torch::Tensor(const torch::Tensor& inputs)> forward;
  /// One sample's input (synthetic batches for a search have this shape).
  std::vector<int64_t> sample_shape;
  /// Labels are in [0, classes) (the vocabulary for token models): >= 2.
  int64_t classes = 0;
  InputKind input_kind = InputKind::kFeatures;
};

/// The model, checked (UsageError naming the field: module, forward, sample_shape, classes).
BuiltModel build_user_model(UserModel model);

}  // namespace saturate

#include "saturate/step/model_snapshot.h"

#include <cstring>

#include <torch/torch.h>

namespace saturate {

ModelSnapshot::ModelSnapshot(Model& model, const c10::Device& device) : rng_(capture_rng_states(device)) {
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : model.named_tensors()) {
    const torch::Tensor host = t.detach().to(torch::kCPU).contiguous();
    Saved s;
    s.target = t;
    s.data.resize(host.nbytes());
    if (host.nbytes() > 0) std::memcpy(s.data.data(), host.data_ptr(), host.nbytes());
    bytes_ += static_cast<int64_t>(host.nbytes());
    saved_.push_back(std::move(s));
  }
}

void ModelSnapshot::restore() {
  torch::NoGradGuard no_grad;
  for (Saved& s : saved_) {
    if (s.data.empty()) continue;
    const torch::Tensor host = torch::from_blob(s.data.data(), s.target.sizes(), s.target.options().device(torch::kCPU));
    s.target.copy_(host);
  }
  restore_rng_states(rng_);
}

}  // namespace saturate

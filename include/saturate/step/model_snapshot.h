// Implements: the model and the random generators as they were, put back after probing. A
// search's trials run real optimizer steps (on synthetic labels) and reseed the generators; the
// training that follows must start where it would have started without them. The copy is kept
// in plain host memory, outside the CPU budget allocator, so that it takes nothing from the
// budget the search measures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/models/model.h"
#include "saturate/step/rng_state.h"

namespace saturate {

class ModelSnapshot {
 public:
  /// Copies every parameter and buffer of `model` and the generators of `device`.
  ModelSnapshot(Model& model, const c10::Device& device);
  /// Copies the values back into the same tensors (their storage is kept: optimizers and hooks
  /// holding them stay valid) and restores the generators.
  void restore();
  int64_t bytes() const { return bytes_; }

 private:
  struct Saved {
    torch::Tensor target;
    std::vector<uint8_t> data;
  };
  std::vector<Saved> saved_;
  RngStates rng_;
  int64_t bytes_ = 0;
};

}  // namespace saturate

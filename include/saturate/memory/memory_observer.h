// Implements: the probe observer that records each trial's allocations with phase marks and
// writes the trial's memory breakdown into its JSON (`memory_breakdown`). It keeps the last
// trial's log for the timeline and for planning.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "saturate/memory/breakdown.h"
#include "saturate/memory/events.h"
#include "saturate/memory/recorder.h"
#include "saturate/probe/probe_hooks.h"

namespace saturate {

class MemoryObserver final : public ProbeObserver {
 public:
  /// Records on `workload`'s device; its parameters and buffers are the resident tensors.
  explicit MemoryObserver(Workload& workload);
  /// Records on `device`; `parameters` (a user's model's, may be empty) are the resident
  /// tensors and the breakdown's parameters part.
  MemoryObserver(const torch::Device& device, std::vector<torch::Tensor> parameters);
  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void phase_begin(Phase phase) override;
  void phase_end(Phase phase) override;
  void region_begin(const std::string& name) override;
  void region_end(const std::string& name) override;
  void step_end(int step, bool measured) override;
  void trial_end(Trial& trial) override;

  /// The last trial's log and breakdown.
  const MemoryEventLog& last_log() const { return log_; }
  const MemoryBreakdown& last_breakdown() const { return breakdown_; }
  int64_t last_batch() const { return batch_; }
  /// Sizes of the tensors the model holds (parameters and buffers), one entry each.
  std::vector<int64_t> resident_tensor_bytes() const;

 private:
  std::vector<torch::Tensor> resident_;
  std::unique_ptr<AllocationRecorder> recorder_;
  int64_t parameters_bytes_ = 0;
  int step_ = -1;
  bool in_setup_ = false;
  int64_t batch_ = 0;
  MemoryEventLog log_;
  MemoryBreakdown breakdown_;
};

}  // namespace saturate

#include "saturate/memory/memory_observer.h"

namespace saturate {

MemoryObserver::MemoryObserver(Workload& workload)
    : recorder_(make_allocation_recorder(workload.device())) {
  parameters_bytes_ = workload.parameter_bytes();
  Model& model = workload.model();
  if (auto m = model.module()) {
    for (const auto& p : m->parameters()) resident_.push_back(p);
    for (const auto& b : m->buffers()) resident_.push_back(b);
  } else {
    for (const auto& p : model.parameters()) resident_.push_back(p);
  }
}

MemoryObserver::MemoryObserver(const torch::Device& device, std::vector<torch::Tensor> parameters)
    : resident_(std::move(parameters)), recorder_(make_allocation_recorder(device)) {
  for (const auto& p : resident_)
    if (p.defined() && p.requires_grad()) parameters_bytes_ += static_cast<int64_t>(p.nbytes());
}

std::vector<int64_t> MemoryObserver::resident_tensor_bytes() const {
  std::vector<int64_t> out;
  for (const auto& t : resident_)
    if (t.defined()) out.push_back(static_cast<int64_t>(t.nbytes()));
  return out;
}

void MemoryObserver::trial_begin(int64_t batch) {
  batch_ = batch;
  step_ = -1;
  recorder_->start();
  recorder_->mark(-1, "inputs", true);
  in_setup_ = true;
}

void MemoryObserver::step_begin(int step, bool measured) {
  if (in_setup_) {
    recorder_->mark(-1, "inputs", false);
    in_setup_ = false;
  }
  step_ = step;
  recorder_->mark(step, "step", true, measured);
}

void MemoryObserver::phase_begin(Phase phase) { recorder_->mark(step_, to_string(phase), true); }
void MemoryObserver::phase_end(Phase phase) { recorder_->mark(step_, to_string(phase), false); }
void MemoryObserver::region_begin(const std::string& name) { recorder_->mark(step_, name, true); }
void MemoryObserver::region_end(const std::string& name) { recorder_->mark(step_, name, false); }
void MemoryObserver::step_end(int step, bool measured) { recorder_->mark(step, "step", false, measured); }

void MemoryObserver::trial_end(Trial& trial) {
  log_ = recorder_->stop();
  log_.peak_reserved_bytes = trial.peak_reserved_bytes;
  breakdown_ = analyze_memory(log_, parameters_bytes_);
  trial.findings.memory_breakdown = breakdown_;
}

}  // namespace saturate

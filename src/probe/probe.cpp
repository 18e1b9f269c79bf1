#include "saturate/probe/probe.h"

#include <algorithm>
#include <chrono>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/errors.h"
#include "saturate/core/oom.h"

namespace saturate {
namespace {

std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string msg = c10_error ? c10_error->what_without_backtrace() : e.what();
  const size_t nl = msg.find('\n');
  return nl == std::string::npos ? msg : msg.substr(0, nl);
}

/// Lowers the budget for one trial and puts it back, whatever happens.
class BudgetOverride {
 public:
  BudgetOverride(MemoryMeter& meter, int64_t bytes) : meter_(meter), saved_(meter.budget_bytes()) {
    if (bytes > 0) meter_.set_budget_bytes(bytes);
  }
  ~BudgetOverride() { meter_.set_budget_bytes(saved_); }

 private:
  MemoryMeter& meter_;
  int64_t saved_;
};

}  // namespace

Probe::Probe(Workload& workload, MemoryMeter& meter) : workload_(workload), meter_(meter) {}

int64_t Probe::budget_bytes() const { return meter_.budget_bytes(); }

int64_t Probe::granularity_bytes() const { return meter_.device().is_cuda() ? int64_t{2} << 20 : 0; }

void Probe::set_checkpointing(const CheckpointPolicy& policy) {
  if (policy.enabled() && !as_block_model(workload_.model()))
    throw UsageError(fmt::format("--checkpointing {}: {} has no blocks to checkpoint (a TorchScript model); use "
                                 "--checkpointing none, or a built-in model",
                                 to_string(policy), workload_.model().name()));
  checkpointing_ = policy;
}

void Probe::synchronize() const {
  if (workload_.device().is_cuda()) torch::cuda::synchronize(workload_.device().index());
}

Trial Probe::run(int64_t batch, const TrialRequest& request) {
  using clock = std::chrono::steady_clock;
  Trial t;
  t.batch = batch;
  BudgetOverride budget(meter_, request.budget_bytes);
  t.budget_bytes = meter_.budget_bytes();
  synchronize();
  // cache policy (M1): empty the cache only after an OOM, or when asked; the cost is reported.
  double empty_cache_ms = 0;
  int empty_cache_calls = 0;
  const auto empty_cache = [&] {
    const auto start = clock::now();
    meter_.release_cache();
    empty_cache_ms += std::chrono::duration<double, std::milli>(clock::now() - start).count();
    ++empty_cache_calls;
  };
  if (empty_cache_before_trials_) empty_cache();
  t.baseline_bytes = meter_.stats().allocated_bytes;
  meter_.reset_peak();
  const auto trial_start = clock::now();
  std::vector<double> step_ms;
  Model& model = workload_.model();
  BlockModelImpl* blocks = checkpointing_.enabled() ? as_block_model(model) : nullptr;
  const auto forward = [&](const torch::Tensor& x) {
    return blocks ? forward_with_checkpointing(*blocks, x, checkpointing_) : model.forward(x);
  };
  notify([&](ProbeObserver& o) { o.trial_begin(batch); });
  try {
    if (source_) source_->reset(batch);
    Batch data = source_ ? Batch{} : workload_.synthetic_batch(batch);
    auto optimizer = workload_.make_optimizer();
    model.train(true);
    const int total = request.warmup_steps + request.measure_steps;
    const auto phase = [&](Phase p, auto&& body) {
      notify([&](ProbeObserver& o) { o.phase_begin(p); });
      body();
      notify([&](ProbeObserver& o) { o.phase_end(p); });
    };
    for (int i = 0; i < total; ++i) {
      ++t.steps;
      const bool measured = i >= request.warmup_steps;
      notify([&](ProbeObserver& o) { o.step_begin(i, measured); });
      const auto start = clock::now();
      if (source_) phase(Phase::kDataWait, [&] { data = source_->next(batch); });
      optimizer->zero_grad(/*set_to_none=*/true);
      torch::Tensor loss;
      phase(Phase::kForward, [&] { loss = workload_.loss(forward(data.inputs), data.targets); });
      phase(Phase::kBackward, [&] { loss.backward(); });
      phase(Phase::kOptimizer, [&] { optimizer->step(); });
      synchronize();
      if (measured) step_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - start).count());
      notify([&](ProbeObserver& o) { o.step_end(i, measured); });
    }
    t.status = TrialStatus::kOk;
  } catch (const std::exception& e) {
    t.status = is_out_of_memory(e) ? TrialStatus::kOom : TrialStatus::kError;
    t.error = first_line(e);
  }
  // the optimizer, batch and graph died with the try block; gradients live on the parameters.
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  synchronize();
  const MemoryStats after = meter_.stats();
  t.peak_allocated_bytes = after.peak_allocated_bytes;
  t.peak_reserved_bytes = after.peak_reserved_bytes;
  if (t.status == TrialStatus::kOom) empty_cache();  // hand the failed trial's cache back
  t.after_bytes = meter_.stats().allocated_bytes;
  if (!step_ms.empty()) {
    std::sort(step_ms.begin(), step_ms.end());
    const size_t n = step_ms.size();
    t.step_time_ms = n % 2 ? step_ms[n / 2] : 0.5 * (step_ms[n / 2 - 1] + step_ms[n / 2]);
    t.samples_per_s = t.step_time_ms > 0 ? 1000.0 * static_cast<double>(batch) / t.step_time_ms : 0;
  }
  t.seconds = std::chrono::duration<double>(clock::now() - trial_start).count();
  if (checkpointing_.enabled()) t.extra["checkpointing"] = to_string(checkpointing_);
  if (empty_cache_calls > 0) {
    t.extra["empty_cache_ms"] = empty_cache_ms;
    t.extra["empty_cache_calls"] = empty_cache_calls;
  }
  notify([&](ProbeObserver& o) { o.trial_end(t); });
  return t;
}

}  // namespace saturate

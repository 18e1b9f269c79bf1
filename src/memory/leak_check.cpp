#include "saturate/memory/leak_check.h"

#include <chrono>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "saturate/core/oom.h"
#include "saturate/core/units.h"

namespace saturate {

LeakWatch::LeakWatch(MemoryMeter& meter, LeakOptions options) : meter_(meter), detector_(options) {}

std::string LeakWatch::after_step(int64_t step) {
  detector_.observe(step, meter_.stats().allocated_bytes);
  if (!detector_.warn_once()) return "";
  const LeakReport r = detector_.report();
  return fmt::format("memory grows by {} per step since step {} ({} -> {}): something keeps tensors alive across "
                     "steps (a kept loss with its graph, a list of outputs); see docs/memory.md",
                     format_bytes(static_cast<int64_t>(r.bytes_per_step)), r.first_step, format_bytes(r.warm_bytes),
                     format_bytes(r.last_bytes));
}

LeakCheckResult run_leak_check(Workload& workload, MemoryMeter& meter, const LeakCheckOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  LeakCheckResult r;
  LeakDetector detector(o.leak);
  Model& model = workload.model();
  const auto sync = [&] {
    if (workload.device().is_cuda()) torch::cuda::synchronize(workload.device().index());
  };
  {
    std::vector<torch::Tensor> kept;
    int step = 0;
    try {
      Batch data = workload.synthetic_batch(o.batch);
      auto optimizer = workload.make_optimizer();
      model.train(true);
      for (; step < o.steps; ++step) {
        optimizer->zero_grad(/*set_to_none=*/true);
        torch::Tensor loss = workload.loss(model.forward(data.inputs), data.targets);
        loss.backward({}, /*retain_graph=*/o.keep_loss_graph);
        optimizer->step();
        if (o.keep_loss_graph) kept.push_back(loss);
        sync();
        const int64_t bytes = meter.stats().allocated_bytes;
        r.allocated_after_step_bytes.push_back(bytes);
        detector.observe(step, bytes);
      }
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
      r.oom_step = step;
      const std::string what = e.what();
      r.error = what.substr(0, what.find('\n'));
    }
  }
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  sync();
  r.report = detector.report();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace saturate

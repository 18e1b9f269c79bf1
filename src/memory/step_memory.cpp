#include "saturate/memory/step_memory.h"

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/probe/probe.h"

namespace saturate {

StepMemory measure_step_memory(TrialStep& step, MemoryMeter& meter, int64_t batch,
                               const std::vector<torch::Tensor>& parameters, int warmup_steps) {
  if (batch <= 0) throw UsageError(fmt::format("batch {}: not a positive number of samples", batch));
  if (warmup_steps < 0) throw UsageError(fmt::format("warm-up steps {}: negative; give 0 or more", warmup_steps));
  Probe probe(step, meter);
  MemoryObserver observer(step.device(), parameters);
  probe.add_observer(&observer);
  StepMemory m;
  m.trial = probe.run(batch, {warmup_steps, 1, 0});
  m.breakdown = observer.last_breakdown();
  return m;
}

}  // namespace saturate

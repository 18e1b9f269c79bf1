#include "saturate/memory/plan_runner.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/step/fast_paths.h"

namespace saturate {

std::pair<int64_t, int64_t> parse_plan_batches(const std::string& text) {
  const size_t comma = text.find(',');
  const auto bad = [&] {
    return UsageError("plan_batches", fmt::format("'{}' is not two distinct positive batches such as 4,8", text));
  };
  if (comma == std::string::npos) throw bad();
  int64_t a = 0, b = 0;
  try {
    size_t used = 0;
    a = std::stoll(text.substr(0, comma), &used);
    if (used != comma) throw bad();
    const std::string rest = text.substr(comma + 1);
    b = std::stoll(rest, &used);
    if (used != rest.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (a <= 0 || b <= 0 || a == b) throw bad();
  return {std::min(a, b), std::max(a, b)};
}

namespace {

PlanResult plan_from_probe(Probe& probe, MemoryObserver& observer, const PlanRunOptions& o,
                           const std::string& device_here) {
  probe.add_observer(&observer);
  const auto record = [&](int64_t batch) {
    const Trial t = probe.run(batch, {1, 1, 0});
    if (!t.ok())
      throw RuntimeFailure(fmt::format("`plan_for`: recording batch {} failed here ({}); choose smaller "
                                       "`plan_batches` or raise `memory_budget`",
                                       batch, t.error));
    return trace_from_log(observer.last_log(), batch, observer.resident_tensor_bytes());
  };
  AllocationTrace a = record(o.batch_a);
  AllocationTrace b = record(o.batch_b);
  std::string note;
  if (!traces_align(a, b) && at::get_num_threads() > 1) {
    // with several intra-op threads, some operators allocate their threads' buffers in an order
    // that varies from step to step (measured: gpt 2x128 with 2 and 4 threads): record again with
    // one thread, whose order follows the operators
    const int threads = at::get_num_threads();
    FastPaths one_thread;
    one_thread.threads = 1;
    const ProcessSwitches recording_threads(one_thread);
    a = record(o.batch_a);
    b = record(o.batch_b);
    note = fmt::format(", recorded with 1 intra-op thread (with {} the allocation order varied between steps)",
                       threads);
  }
  PlanOptions po;
  po.allocator = o.allocator;
  po.capacity_bytes = o.target.capacity_bytes;
  po.target_fraction = o.target_fraction;
  po.context_bytes = o.context_bytes;
  PlanResult p = plan_batch(a, b, po);
  p.target = o.target.name;
  p.device_here = device_here;
  p.method += note;
  return p;
}

}  // namespace

PlanResult plan_from_run(Workload& workload, MemoryMeter& meter, const PlanRunOptions& o) {
  Probe probe(workload, meter);
  MemoryObserver observer(workload);
  return plan_from_probe(probe, observer, o, workload.device().str());
}

PlanResult plan_from_run(TrialStep& step, std::vector<torch::Tensor> parameters, MemoryMeter& meter,
                         const PlanRunOptions& o) {
  if (o.batch_a <= 0 || o.batch_b <= 0 || o.batch_a == o.batch_b)
    throw UsageError("plan_batches", fmt::format("{},{} are not two distinct positive batches such as 4,8", o.batch_a,
                                                 o.batch_b));
  Probe probe(step, meter);
  MemoryObserver observer(step.device(), std::move(parameters));
  return plan_from_probe(probe, observer, o, step.device().str());
}

}  // namespace saturate

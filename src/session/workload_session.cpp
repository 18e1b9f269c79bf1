#include "saturate/session/workload_session.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {

std::unique_ptr<WorkloadSession> open_workload(const WorkloadOptions& o) {
  auto s = std::make_unique<WorkloadSession>();
  s->context = run_context_here();
  if (o.threads < 0) throw UsageError("threads", fmt::format("{} is negative; give a positive count", o.threads));
  if (o.threads > 0) at::set_num_threads(o.threads);
  const OptimizerKind optimizer = parse_optimizer(o.optimizer);
  if (o.lr < 0) throw UsageError("lr", fmt::format("{} is negative; give a positive learning rate", o.lr));
  const ModelSpec spec = resolve_model_spec(o.model);  // usage errors before any device work
  std::optional<MemorySize> budget;
  if (!o.memory_budget.empty()) budget = parse_memory_size(o.memory_budget, "`memory_budget`");

  s->device = resolve_device(o.device);
  s->meter = make_memory_meter(s->device);
  int64_t budget_bytes = s->device.is_cpu() ? kDefaultCpuBudgetBytes : s->meter->capacity_bytes();
  if (budget) budget_bytes = budget->resolve(s->meter->capacity_bytes());
  if (s->device.is_cuda() && budget_bytes > s->meter->capacity_bytes())
    throw UsageError(fmt::format("`memory_budget` {}: larger than {}'s {}; give at most the device's memory",
                                 o.memory_budget, s->device.str(), format_bytes(s->meter->capacity_bytes())));
  if (budget_bytes < 1) throw UsageError(fmt::format("`memory_budget` {}: resolves to 0 bytes", o.memory_budget));
  BuiltModel built = build_model(spec);
  s->context.model_name = built.spec.name;
  s->context.model_parameters = built.model->parameter_count();
  s->context.input = built.input_kind == InputKind::kTokens
                         ? fmt::format("tokens {} (vocab {})", built.spec.seq_len, built.spec.vocab)
                         : format_shape(built.spec.input_shape);
  s->workload = std::make_unique<Workload>(std::move(built), s->device, optimizer, o.lr, o.model.seed);
  // the budget starts after the model is on the device: parameters count against it too.
  s->meter->set_budget_bytes(budget_bytes);
  s->context.device = s->device.str();
  s->context.device_info = describe_device(s->device);
  s->context.optimizer = to_string(optimizer);
  s->context.budget_bytes = s->meter->budget_bytes();
  s->context.gpu_name = device_name(s->device);
  const int64_t params_in_use = s->meter->stats().allocated_bytes;
  if (params_in_use > budget_bytes)
    throw RuntimeFailure(fmt::format("`memory_budget` {}: the model's parameters alone take {}; raise the budget "
                                     "or choose a smaller model",
                                     format_bytes(budget_bytes), format_bytes(params_in_use)));
  return s;
}

}  // namespace saturate

#include "saturate/session/workload_session.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/option_text.h"
#include "saturate/core/units.h"
#include "saturate/monitor/proc_stats.h"
#include "saturate/models/model.h"
#include "saturate/search/fixed_cost.h"

namespace saturate {
namespace {

/// The largest unit FSDP would shard a built-in model into: its stem, a block or its head, by
/// parameter bytes (0 for a model that is not made of blocks: a lower bound).
int64_t largest_unit_bytes(Model& model) {
  BlockModelImpl* blocks = as_block_model(model);
  if (!blocks) return 0;
  int64_t largest = 0;
  const auto bytes_of = [](const torch::nn::AnyModule& m) {
    int64_t bytes = 0;
    if (!m.is_empty())
      for (const auto& p : m.ptr()->parameters()) bytes += static_cast<int64_t>(p.nbytes());
    return bytes;
  };
  largest = std::max(bytes_of(blocks->stem), bytes_of(blocks->head));
  for (const auto& b : blocks->blocks) largest = std::max(largest, bytes_of(b));
  return largest;
}

/// The model's parameters alone do not fit one device: the ways out, sharding among them (issue 42).
RuntimeFailure does_not_fit_one_device(Workload& workload, OptimizerKind optimizer, int64_t params_bytes,
                                       int64_t budget_bytes) {
  const FixedCost cost = fixed_cost_of(params_bytes, optimizer_state_copies(to_string(optimizer), true),
                                       to_string(optimizer));
  const int64_t unit = largest_unit_bytes(workload.model());
  const int64_t ranks = min_ranks_to_shard(cost, unit, budget_bytes);
  const std::string shard =
      ranks > 0
          ? fmt::format("shard it over at least {} ranks of this budget (FSDP: {} / {} ranks + 2 x its largest unit {} = "
                        "{} of model states a rank, before activations): under torchrun, "
                        "saturate.shard_plan(make_model, make_optimizer, step) chooses the strategy (FSDP with or "
                        "without resharding, checkpointing) and the micro-batch, and plan.apply(model) wraps each "
                        "block with torch.distributed.fsdp.fully_shard; a model you sharded yourself is searched "
                        "with saturate.search(step, ranks=\"auto\") (docs/sharding.md)",
                        ranks, format_bytes(cost.total_bytes()), ranks, format_bytes(unit),
                        format_bytes(cost.total_bytes() / ranks + 2 * unit))
          : fmt::format("its largest block ({}) does not fit twice in this budget, so no number of ranks sharding it "
                        "block by block fits either",
                        format_bytes(unit));
  return RuntimeFailure(fmt::format(
      "`memory_budget` {}: the model's parameters alone take {}, and training holds {} of model states ({} of "
      "weights, as much in gradients, {} of {} state); raise the budget, choose a smaller model, or {}",
      format_bytes(budget_bytes), format_bytes(params_bytes), format_bytes(cost.total_bytes()),
      format_bytes(cost.weight_bytes), format_bytes(cost.optimizer_state_bytes), to_string(optimizer), shard));
}

}  // namespace

std::string rank_budget(const std::string& budgets, const DistEnv& env) {
  if (budgets.find(',') == std::string::npos) return budgets;  // one value: every rank's
  const std::vector<std::string> each = split_list(budgets);
  if (static_cast<int>(each.size()) != env.world_size)
    throw UsageError("memory_budget",
                     fmt::format("{} gives {} budgets, one a rank, but the run has {} rank(s){}; give one value for "
                                 "every rank, or as many as WORLD_SIZE",
                                 budgets, each.size(), env.world_size,
                                 env.world_size == 1 ? " (no RANK/WORLD_SIZE: saturate launch or torchrun set them)"
                                                     : ""));
  for (size_t r = 0; r < each.size(); ++r)
    if (each[r].empty())
      throw UsageError("memory_budget", fmt::format("{}: rank {}'s budget is empty; give a size for every rank", budgets, r));
  return each[static_cast<size_t>(env.rank)];
}

WorkloadSession::~WorkloadSession() {
  if (threads_before > 0) at::set_num_threads(threads_before);
}

std::unique_ptr<WorkloadSession> open_workload(const WorkloadOptions& o) {
  const OthersCpuMeter load;  // the machine's load while the workload is made: the threads' default
  auto s = std::make_unique<WorkloadSession>();
  s->context = run_context_here();
  if (o.threads < 0) throw UsageError("threads", fmt::format("{} is negative; give a positive count", o.threads));
  if (o.threads > 0) at::set_num_threads(o.threads);
  const OptimizerKind optimizer = parse_optimizer(o.optimizer);
  if (o.lr < 0) throw UsageError("lr", fmt::format("{} is negative; give a positive learning rate", o.lr));
  const ModelSpec spec = resolve_model_spec(o.model);  // usage errors before any device work
  std::optional<MemorySize> budget;
  if (!o.memory_budget.empty()) budget = parse_memory_size(rank_budget(o.memory_budget), "`memory_budget`");

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
  if (s->device.is_cpu()) {
    // the threads: given, or OMP_NUM_THREADS (a launcher's share of the cores), or chosen from the
    // load now: all of LibTorch's on a quiet machine, the CPUs others leave free on a busy one
    const char* omp = std::getenv("OMP_NUM_THREADS");
    std::optional<CpuThreads> fewer;
    if (o.threads > 0) {
      s->context.threads_reason = "given";
    } else if (omp && *omp) {
      s->context.threads_reason = fmt::format("OMP_NUM_THREADS={}", omp);
    } else if (!o.threads_from_load) {
      s->context.threads_reason = "LibTorch's default (a training run keeps it: the same bits run to run)";
    } else {
      const int most = at::get_num_threads();
      const CpuThreads t = choose_cpu_threads(load, most);
      if (t.threads != most) {
        s->threads_before = most;
        at::set_num_threads(t.threads);
      }
      s->context.threads_reason = "auto: " + t.reason;
      if (t.threads < most) fewer = t;
    }
    s->context.device_info =
        fewer ? fmt::format("cpu ({} threads of {} CPUs: {:.1f} busy with other processes)", fewer->threads,
                            fewer->allowed_cpus, fewer->others_busy_cpus)
              : describe_device(s->device);
  } else {
    s->context.device_info = describe_device(s->device);
  }
  s->context.optimizer = to_string(optimizer);
  s->context.budget_bytes = s->meter->budget_bytes();
  s->context.gpu_name = device_name(s->device);
  const int64_t params_in_use = s->meter->stats().allocated_bytes;
  if (params_in_use > budget_bytes) throw does_not_fit_one_device(*s->workload, optimizer, params_in_use, budget_bytes);
  return s;
}

}  // namespace saturate

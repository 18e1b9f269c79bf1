// Implements: saturate._saturate, the Python module over the C++ library. It only translates:
// the Python package (python/saturate) holds the API users see, this holds the calls into the
// probe, the search, the memory breakdown and the monitor. A Python step reaches C++ as a
// callable that never raises: it returns None after a step, or (kind, message) after a failure
// whose exception the Python side has already dropped (with its traceback's frames), so that
// no tensor of a failed step outlives it here.
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <mutex>
#include <tuple>
#include <unordered_set>
#include <vector>

#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/cpu_math.h"
#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/option_text.h"
#include "saturate/core/memory_meter.h"
#include "saturate/core/units.h"
#include "saturate/memory/breakdown.h"
#include "saturate/memory/plan.h"
#include "saturate/memory/step_memory.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/probe/user_step.h"
#include "saturate/report/report.h"
#include "saturate/search/fixed_cost.h"
#include "saturate/search/search.h"
#include "saturate/report/memory_text.h"
#include "saturate/report/html_report.h"
#include "saturate/session/user_search.h"
#include "saturate/session/fast_path_trials.h"
#include "saturate/search/config_choice.h"
#include "saturate/session/memory_session.h"
#include "saturate/session/run_options.h"
#include "saturate/step/fast_paths.h"
#include "saturate/session/search_session.h"
#include "saturate/session/workload_search.h"
#include "saturate/session/workload_session.h"
#include "saturate/memory/memory_observer.h"
#include "saturate/core/oom.h"
#include "saturate/memory/leak_check.h"
#include "saturate/memory/plan_runner.h"
#include "saturate/data/token_budget.h"
#include "saturate/data/worst_case.h"
#include "saturate/train/micro_batch_memory.h"
#include <fmt/format.h>

#include "typed_results.h"

namespace py = pybind11;

namespace saturate {
namespace {

std::string with_keywords(const std::string& message);

#ifndef SATURATE_VERSION
#define SATURATE_VERSION "0.1.0"
#endif

/// A failure the Python step reported that is not an out-of-memory: the trial's error.
struct PythonStepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The C++ step over the Python one. Kinds: "oom" becomes c10::OutOfMemoryError (a trial
/// result), anything else a PythonStepError (the search stops there, with the message).
/// A Python callable held for C++ code that runs without the GIL: copies share one reference
/// (no reference counting without the GIL), and each call takes the GIL.
using SharedFn = std::shared_ptr<py::function>;
SharedFn share(py::function fn) { return std::make_shared<py::function>(std::move(fn)); }

// The searches run with the GIL released (LibTorch's autograd engine refuses to run while it is
// held: the monitor's calibration runs a backward in C++), and take it back to call Python.
UserTrialStep::StepFn wrap_step(SharedFn run_step) {
  return [run_step](int64_t batch) {
    std::pair<std::string, std::string> report;
    {
      py::gil_scoped_acquire gil;
      py::object r = (*run_step)(batch);
      if (r.is_none()) return;
      report = r.cast<std::pair<std::string, std::string>>();
    }
    if (report.first == "oom") throw c10::OutOfMemoryError({__func__, __FILE__, __LINE__}, report.second);
    throw PythonStepError(report.second);
  };
}

UserStepOptions step_options(const std::string& device, std::vector<torch::Tensor> parameters,
                             py::object after_trial, const std::string& name) {
  UserStepOptions o;
  o.device = resolve_device(device);
  o.parameters = std::move(parameters);
  o.name = name;
  if (!after_trial.is_none()) {
    SharedFn fn = share(after_trial.cast<py::function>());
    o.after_trial = [fn]() {
      py::gil_scoped_acquire gil;
      try {
        (*fn)();
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("saturate: after_trial");
      }
    };
  }
  return o;
}

/// A meter for `device` under `budget_bytes` (0: the device's own memory; on CPU the budget
/// installed with cpu_memory_budget, which must then exist).
std::unique_ptr<MemoryMeter> make_meter(const c10::Device& device, int64_t budget_bytes) {
  if (device.is_cpu() && !cpu_budget_allocator_installed())
    throw RuntimeFailure(
        "the CPU budget allocator is not in charge: a CPU measurement outside saturate's own calls "
        "(python/saturate/_allocator.py puts it in charge for each)");
  auto meter = make_memory_meter(device);
  // (the CPU meter reports the machine's RAM without a budget: a search would run until the
  // kernel's OOM killer ends the process)
  if (device.is_cpu() && budget_bytes <= 0 && cpu_memory_counters().budget_bytes <= 0)
    throw UsageError("memory_budget",
                     "a CPU search needs a budget: pass memory_budget='512MiB' (or run it inside "
                     "saturate.cpu_memory_budget('512MiB')), so that out-of-memory happens at that size");
  return meter;
}

RunContext context_for(const c10::Device& device, const MemoryMeter& meter, const std::string& name,
                       int64_t parameters, const std::string& optimizer) {
  RunContext c = run_context_here();
  c.command = "python";
  c.device = device.str();
  c.device_info = describe_device(device);
  c.gpu_name = device_name(device);
  c.model_name = name;
  c.model_parameters = parameters;
  c.input = "the user's step";
  c.optimizer = optimizer;
  c.budget_bytes = meter.budget_bytes();
  return c;
}

int64_t count_parameters(const std::vector<torch::Tensor>& parameters) {
  int64_t n = 0;
  for (const auto& p : parameters) n += p.numel();
  return n;
}

/// A Python callable `measure(batch) -> (small_batch, small_sq_norm, big_batch, big_sq_norm)`
/// (saturate._noise: the user's step run at half the batch and at the batch, learning rate 0) as
/// the library's noise measure. Its exceptions propagate as Python's.
NoiseMeasure python_noise_measure(py::object measure) {
  if (measure.is_none()) return {};
  SharedFn fn = share(measure.cast<py::function>());
  return [fn](int64_t batch, int steps) {
    return measure_noise_scale(
        [fn](int64_t b) {
          py::gil_scoped_acquire gil;
          const auto t = (*fn)(b).cast<std::tuple<int64_t, double, int64_t, double>>();
          return GradientNormPair{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)};
        },
        batch, steps);
  };
}

/// The collectives of saturate._ranks (torch.distributed on the user's process group), for the
/// library's rank-synced search: each call takes the GIL and runs the Python collective.
class PythonCollectives final : public Collectives {
 public:
  explicit PythonCollectives(const py::object& ranks)
      : rank_(ranks.attr("rank").cast<int>()),
        world_(ranks.attr("world_size").cast<int>()),
        max_(share(ranks.attr("all_reduce_max").cast<py::function>())),
        gather_(share(ranks.attr("all_gather").cast<py::function>())) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& values) override { return call(*max_, values); }
  std::vector<int64_t> all_gather(const std::vector<int64_t>& values) override { return call(*gather_, values); }

 private:
  static std::vector<int64_t> call(py::function& fn, const std::vector<int64_t>& values) {
    py::gil_scoped_acquire gil;
    try {
      return fn(values).cast<std::vector<int64_t>>();
    } catch (py::error_already_set& e) {
      throw RuntimeFailure(std::string("a collective between the ranks failed: ") + e.what());
    }
  }
  int rank_;
  int world_;
  SharedFn max_;
  SharedFn gather_;
};

/// saturate.search: the library's user-step search (session/user_search.h); the keywords are its
/// options, checked there.
SearchOutcome search(py::function run_step, const std::string& device, int64_t budget_bytes, double target_fraction,
                   const std::string& strategy, int64_t max_batch, int64_t start_batch, int warmup_steps,
                   int measure_steps, const std::string& objective, double knee_fraction, int noise_steps,
                   int64_t base_batch, std::vector<torch::Tensor> parameters,
                   py::object after_trial, const std::string& name, const std::string& optimizer, bool monitor,
                   py::object on_trial, py::object noise, py::object ranks, bool exact_ranks) {
  UserSearchOptions o;
  o.search.strategy = parse_strategy(strategy);
  o.search.target_fraction = target_fraction;
  o.search.max_batch = max_batch;
  o.search.start_batch = start_batch;
  o.search.warmup_steps = warmup_steps;
  o.search.measure_steps = measure_steps;
  o.objective.objective = parse_objective(objective);
  o.objective.knee_fraction = knee_fraction;
  o.objective.noise_steps = noise_steps;
  o.objective.base_batch = base_batch;
  // AdaScale's gain for SGD, its square root for adaptive optimizers (Adam, AdamW, ...), as the
  // built-in workloads choose (session/objective_session.h); `optimizer` lists the step's classes
  o.objective.lr_rule = optimizer == "SGD" ? LrRule::kAdaScale : LrRule::kAdaScaleSqrt;
  o.budget_bytes = budget_bytes;
  o.monitor = monitor;
  o.exact_ranks = exact_ranks;
  o.check();  // before the step or the device is touched
  std::optional<PythonCollectives> comm;
  UserSearchRanks synced;
  if (!ranks.is_none()) {
    comm.emplace(ranks);
    synced.comm = &*comm;
    synced.backend = ranks.attr("backend").cast<std::string>();
  }
  const int64_t params = count_parameters(parameters);
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  if (!on_trial.is_none()) {
    SharedFn fn = share(on_trial.cast<py::function>());
    o.search.on_trial = [fn](const Trial& t) {
      py::gil_scoped_acquire gil;
      try {
        (*fn)(py::cast(t));
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("saturate: on_trial");
      }
    };
  }
  UserSearchResult r;
  {
    py::gil_scoped_release nogil;
    r = run_user_search(step, *meter, o, python_noise_measure(noise), "the step's own batches", synced);
  }
  RunContext context = context_for(step.device(), *meter, name, params, optimizer);
  context.budget_bytes = r.search.budget_bytes;  // the search's (the meter's is put back by now)
  context.world_size = r.world_size;
  std::optional<ObjectiveOutcome> outcome;  // none for memory, as the JSON has no "objective"
  if (r.objective.requested != Objective::kMemory) outcome = r.objective;
  return {r.search, r.compute(), r.world_size > 1 ? r.ranks : std::vector<RankMax>{}, r.decision(), outcome,
          r.to_json(context), r.to_text(context), memory_growth(r.search).warning()};
}

py::tuple memory_breakdown(py::function run_step, int64_t batch, const std::string& device, int64_t budget_bytes,
                             std::vector<torch::Tensor> parameters, py::object after_trial, const std::string& name,
                             int warmup_steps) {
  if (batch < 1) throw UsageError("batch_size", "batch_size=" + std::to_string(batch) + " must be at least 1");
  if (warmup_steps < 0) throw UsageError("warmup_steps", "warmup_steps must be >= 0");
  const std::vector<torch::Tensor> held = parameters;
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  ScopedBudget budget(*meter, budget_bytes);
  StepMemory m;
  {
    py::gil_scoped_release nogil;
    m = measure_step_memory(step, *meter, batch, held, warmup_steps);
  }
  nlohmann::json j = {{"trial", trial_json(m.trial)}, {"budget_bytes", meter->budget_bytes()}};
  std::string table;
  if (m.trial.ok()) {
    table = breakdown_table(m.breakdown);
    j["breakdown"] = to_json(m.breakdown);
    j["table"] = table;
  }
  return py::make_tuple(m.trial, m.breakdown, to_python(j), table);
}

/// saturate.leak_check: the library's leak loop (memory/leak_check.h) over the user's step;
/// `run_step(k, site_step)` returns None or (kind, message) as a search's step does, and labels
/// its own allocations during site steps (Python source lines, set_allocation_site).
py::tuple leak_check(py::function run_step, const std::string& device, int64_t budget_bytes, int steps,
                       int site_steps, int warmup_steps, int64_t min_bytes_per_step) {
  LeakLoopOptions o;
  o.steps = steps;
  o.site_steps = site_steps;
  o.leak.warmup_steps = warmup_steps;
  o.leak.min_bytes_per_step = min_bytes_per_step;
  o.operator_sites = false;
  o.sites_method =
      "CPU allocator event log, each allocation named by the Python source lines running when it was made "
      "(the step's line > the innermost line outside torch): allocations still alive at the end of the site "
      "steps, per step";
  o.check();
  const c10::Device dev = resolve_device(device);
  auto meter = make_meter(dev, budget_bytes);
  SharedFn fn = share(std::move(run_step));
  const auto step = [fn](int k, bool site_step) {
    std::pair<std::string, std::string> report;
    {
      py::gil_scoped_acquire gil;
      py::object r = (*fn)(k, site_step);
      if (r.is_none()) return;
      report = r.cast<std::pair<std::string, std::string>>();
    }
    if (report.first == "oom") throw c10::OutOfMemoryError({__func__, __FILE__, __LINE__}, report.second);
    throw PythonStepError(report.second);
  };
  LeakCheckResult r;
  {
    ScopedBudget budget(*meter, budget_bytes);
    py::gil_scoped_release nogil;
    r = run_leak_loop(step, *meter, o);
  }
  const std::string text = leak_text(r, steps);
  nlohmann::json j = {{"leak", to_json(r)}, {"text", text}, {"seconds", r.seconds}, {"device", dev.str()}};
  if (!r.error.empty()) j["error"] = r.error;
  return typed_outcome(r, j, text);
}

/// saturate.plan_for: the library's plan from a run here (memory/plan_runner.h) on the user's step.
py::tuple plan_for(py::function run_step, const std::string& target, const std::string& device,
                     int64_t budget_bytes, int64_t batch_a, int64_t batch_b, double target_fraction,
                     const std::string& allocator, std::vector<torch::Tensor> parameters, py::object after_trial,
                     const std::string& name) {
  PlanRunOptions o;
  o.target = parse_plan_target(target);
  o.allocator = allocator.empty() ? AllocatorKind::kCudaCaching : parse_allocator_kind(allocator, "allocator");
  o.target_fraction = target_fraction;  // checked by plan_batch (after the two recorded steps)
  o.batch_a = std::min(batch_a, batch_b);
  o.batch_b = std::max(batch_a, batch_b);
  const std::vector<torch::Tensor> resident = parameters;
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  PlanResult plan;
  {
    ScopedBudget budget(*meter, budget_bytes);
    py::gil_scoped_release nogil;
    plan = plan_from_run(step, resident, *meter, o);
  }
  return typed_outcome(plan, plan_json(plan), with_keywords(plan_text(plan)));
}

/// The fast paths that apply to the user's step (session/user_search.h): the fast_paths JSON.
py::tuple fast_paths(py::function run_step, const std::string& device, int64_t batch, int64_t budget_bytes,
                       int timed_steps, std::vector<torch::Tensor> parameters, py::object after_trial,
                       const std::string& name) {
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  FastPathChoice choice;
  {
    ScopedBudget budget(*meter, budget_bytes);
    py::gil_scoped_release nogil;
    choice = try_user_fast_paths(step, *meter, batch, timed_steps);
  }
  return typed_outcome(choice, to_json(choice, batch));
}

/// Interned labels for set_allocation_site: the allocator's log keeps the pointer.
const char* intern_site(const std::string& label) {
  static std::mutex mutex;
  static std::unordered_set<std::string> labels;
  std::lock_guard<std::mutex> lock(mutex);
  return labels.insert(label).first->c_str();
}

/// The monitor over a user's loop: one window from start() to stop(), steps marked by the user.
class LoopMonitor {
 public:
  LoopMonitor(const std::string& device, double sample_hz, int warmup_steps, const std::string& trace_path)
      : device_(resolve_device(device)), warmup_(warmup_steps) {
    if (sample_hz < 0) throw UsageError("sample_hz", "sample_hz must be >= 0 (0: samples at start and stop only)");
    if (warmup_steps < 0) throw UsageError("warmup_steps", "warmup_steps must be >= 0");
    MonitorOptions o;
    o.sample_hz = sample_hz;
    o.cuda = device_.is_cuda();
    o.device_index = device_.has_index() ? device_.index() : 0;
    o.training = true;
    o.trace_path = trace_path;
    observer_ = std::make_unique<MonitorObserver>(o);
  }
  void start() {
    if (install_) throw UsageError("monitor", "the monitor is already running");
    observer_->trial_begin(0);
    install_.emplace(observer_.get());
  }
  void step_begin() {
    if (!install_) throw UsageError("monitor", "step() outside the monitor: use it inside `with saturate.monitor()`");
    if (in_step_) step_end();
    in_step_ = true;
    observer_->step_begin(step_, step_ >= warmup_);
  }
  void step_end() {
    if (!in_step_) return;
    in_step_ = false;
    observer_->step_end(step_, step_ >= warmup_);
    ++step_;
  }
  int steps() const { return step_; }
  int timed_steps() const { return std::max(0, step_ - warmup_); }
  /// (findings, their JSON as a dict): the window's bottleneck, phases and utilization.
  py::tuple stop(bool failed) {
    if (!install_) throw UsageError("monitor", "the monitor is not running");
    if (in_step_) {
      if (failed) in_step_ = false;
      else step_end();
    }
    install_.reset();
    Trial t;
    t.status = TrialStatus::kOk;
    t.steps = step_;
    observer_->trial_end(t);
    observer_->finish();
    nlohmann::json j = nlohmann::json::object();
    add_findings_json(t.findings, j);
    j["steps"] = steps();
    j["timed_steps"] = timed_steps();
    j["device"] = device_.str();
    const std::string note = observer_->nvml_note();
    if (!note.empty()) j["nvml_note"] = note;
    py::gil_scoped_acquire gil;  // stop runs without it (its call guard); the objects need it
    return typed_outcome(t.findings, j);
  }

 private:
  c10::Device device_;
  int warmup_;
  int step_ = 0;
  bool in_step_ = false;
  std::unique_ptr<MonitorObserver> observer_;
  std::optional<PhaseObserverInstall> install_;
};

/// A phase marker for a `with` block: begins at enter, ends at a clean exit; an exception
/// leaves it open, as a failed built-in step does (the trial ends with it).
class PhaseMarker {
 public:
  explicit PhaseMarker(const std::string& name) : phase_(parse_phase(name)) {}
  /// The observer of this thread, for an enter() on another (the backward runs on autograd's
  /// device threads, where no observer is installed).
  void capture() { captured_ = current_phase_observer(); }
  void enter() {
    observer_ = captured_ ? captured_ : current_phase_observer();
    captured_ = nullptr;
    if (observer_) observer_->phase_begin(phase_);
  }
  void exit(bool clean) {
    if (observer_ && clean) observer_->phase_end(phase_);
    observer_ = nullptr;
  }

 private:
  Phase phase_;
  PhaseObserver* observer_ = nullptr;
  PhaseObserver* captured_ = nullptr;
};

/// A named region of the memory log (PhaseObserver::region_begin): what is allocated between
/// enter and a clean exit is counted as that part of the peak. Captures this thread's observer at
/// construction (FSDP's hooks run on the step's thread on CPU, on autograd's on CUDA).
class MemoryRegion {
 public:
  explicit MemoryRegion(const std::string& name) : name_(name), observer_(current_phase_observer()) {}
  void enter() {
    if (observer_) observer_->region_begin(name_);
  }
  void exit(bool clean) {
    if (observer_ && clean) observer_->region_end(name_);
  }

 private:
  std::string name_;
  PhaseObserver* observer_;
};

/// A library error about one option, in the words of the Python call: the keyword that set it
/// ("target_memory: 1.5 is outside (0, 1]").
/// The Python keyword that sets a library option; the option's own name when the keyword is the
/// same or Python has none.
std::string keyword_for_option(const std::string& option) {
  static const std::pair<const char*, const char*> kKeywords[] = {{"target_fraction", "target_memory"},
                                                                  {"measure_steps", "timed_steps"},
                                                                  {"start_batch", "min_batch"},
                                                                  {"budget_bytes", "memory_budget"},
                                                                  {"plan_for", "target"},
                                                                  {"plan_batches", "batches"}};
  for (const auto& [name, keyword] : kKeywords)
    if (option == name) return keyword;
  return option;
}

/// A library message with each option it names mid-sentence (`start_batch`) said as its keyword.
std::string with_keywords(const std::string& message) {
  return name_options(message, [](const std::string& option) { return std::optional(keyword_for_option(option)); });
}

std::string with_keyword(const UsageError& e) {
  const std::string message = with_keywords(e.what());
  if (e.option().empty()) return message;
  return keyword_for_option(e.option()) + ": " + message;
}


/// The workload of a zoo model (or a TorchScript file) from keyword arguments, as the command
/// line's --model, --width, ... give it (session/workload_session.h).
WorkloadOptions zoo_workload(const std::string& model, const std::string& device, const std::string& memory_budget,
                             const py::dict& spec) {
  WorkloadOptions o;
  o.model.name = model;
  o.device = device;
  o.memory_budget = memory_budget;
  for (const auto& [key, value] : spec) {
    const std::string k = py::str(key);
    if (k == "input") o.model.input_shape = parse_shape(value.cast<std::string>(), "`input`");
    else if (k == "classes") o.model.classes = value.cast<int64_t>();
    else if (k == "layers") o.model.layers = value.cast<int64_t>();
    else if (k == "width") o.model.width = value.cast<int64_t>();
    else if (k == "heads") o.model.heads = value.cast<int64_t>();
    else if (k == "seq_len") o.model.seq_len = value.cast<int64_t>();
    else if (k == "vocab") o.model.vocab = value.cast<int64_t>();
    else if (k == "tokens") o.model.tokens = value.cast<bool>();
    else if (k == "seed") o.model.seed = value.cast<uint64_t>();
    else if (k == "optimizer") o.optimizer = value.cast<std::string>();
    else if (k == "lr") o.lr = value.cast<double>();
    else if (k == "threads") o.threads = value.cast<int>();
    else
      throw UsageError(fmt::format("unknown model option '{}' (expected input, classes, layers, width, heads, "
                                   "seq_len, vocab, tokens, seed, optimizer, lr, threads)",
                                   k));
  }
  return o;
}

/// `saturate search` on a zoo model with synthetic batches: the same session, options and JSON.
SearchOutcome zoo_search(const std::string& model, const std::string& device,
                                               const std::string& memory_budget, double target_fraction,
                                               const std::string& strategy, int64_t max_batch, int64_t start_batch,
                                               int measure_steps, const std::string& objective, double knee_fraction,
                                               int noise_steps, int64_t base_batch, const std::string& precision,
                                               const py::dict& spec) {
  WorkloadSearchOptions wo;
  wo.search.strategy = parse_strategy(strategy);
  wo.search.target_fraction = target_fraction;
  wo.search.max_batch = max_batch;
  wo.search.start_batch = start_batch;
  wo.search.measure_steps = measure_steps;
  wo.objective.objective = parse_objective(objective);
  wo.objective.knee_fraction = knee_fraction;
  wo.objective.noise_steps = noise_steps;
  wo.objective.base_batch = base_batch;
  StepSettings step;  // as `saturate search`'s defaults
  step.precision = precision;
  step.fast_paths = "auto";
  step.search = true;
  step.apply_to(wo);
  wo.check();
  auto session = open_workload(zoo_workload(model, device, memory_budget, spec));
  session->context.command = "search";
  wo.try_fast_paths = step.tries_fast_paths(session->device.is_cuda());
  SearchSessionOptions so;
  so.search = wo;
  py::gil_scoped_release nogil;
  const SearchSessionResult r = run_search_session(*session, OpenedData{}, so, nullptr);  // as `saturate search`
  std::ostringstream text;
  print_search(text, session->context, r.found.search());
  text << r.notes;
  std::optional<ObjectiveOutcome> outcome;  // none for memory, as the JSON has no "objective"
  if (r.found.requested_objective != Objective::kMemory) outcome = r.found.objective;
  return {r.found.search(), r.found.compute(), {}, r.found.decision(), outcome, r.to_json(session->context),
          with_keywords(text.str()), memory_growth(r.found.search()).warning()};
}

/// `saturate memory` on a zoo model: the same session, options and JSON.
py::tuple zoo_memory(const std::string& model, const std::string& device,
                                               const std::string& memory_budget, int64_t batch, int warmup_steps,
                                               int leak_check_steps, bool keep_loss, const std::string& precision,
                                               const py::dict& spec) {
  MemorySessionOptions mo;
  mo.batch = batch;
  mo.warmup_steps = warmup_steps;
  mo.leak_check_steps = leak_check_steps;
  mo.keep_loss = keep_loss;
  mo.step.precision = parse_precision(precision);
  mo.check();
  auto session = open_workload(zoo_workload(model, device, memory_budget, spec));
  py::gil_scoped_release nogil;
  const MemorySessionResult r = run_memory_session(*session->workload, *session->meter, mo);
  const nlohmann::json j = r.to_json(session->context);
  const std::string text = with_keywords(r.to_text(session->context));
  py::gil_scoped_acquire gil;
  return typed_outcome(r, j, text);
}

/// The choice among configurations (search/config_choice.h) from each one's typed search:
/// (index, reason).
std::pair<size_t, std::string> choose_config_typed(const std::vector<SearchResult>& results,
                                                   const std::vector<std::string>& names, int64_t required_batch) {
  const ConfigChoice c = choose_config(results, names, required_batch);
  return {c.chosen, c.reason};
}
}  // namespace
}  // namespace saturate

PYBIND11_MODULE(_saturate, m) {
  using namespace saturate;
  m.doc() = "saturate's C++ core (use the `saturate` package, not this module)";
  m.attr("__version__") = SATURATE_VERSION;
  m.attr("libtorch_version") = TORCH_VERSION;
  bind_typed_results(m);

  // usage errors become ValueError, runtime failures RuntimeError
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, with_keyword(e).c_str());
    } catch (const PythonStepError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const RuntimeFailure& e) {
      PyErr_SetString(PyExc_RuntimeError, with_keywords(e.what()).c_str());
    }
  });

  // MKL's vector math started on this thread alone (core/cpu_math.h): a warm-up, no setting
  m.def("start_cpu_math", &start_cpu_math_libraries);
  // the counting allocator is in charge only while saturate measures (python/saturate/_allocator.py)
  set_cpu_budget_name("saturate memory_budget");  // what an allocation past it names
  m.def("acquire_cpu_allocator", &acquire_cpu_budget_allocator);
  m.def("release_cpu_allocator", &release_cpu_budget_allocator);
  m.def("cpu_allocator_in_charge", &cpu_budget_allocator_installed);
  m.def(
      "adopt_cpu_tensors",
      [](const std::vector<at::Tensor>& tensors) {
        int64_t storages = 0, bytes = 0;
        for (const at::Tensor& t : tensors) {
          try {
            if (!t.defined() || !t.device().is_cpu() || !t.has_storage()) continue;
            c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
            if (s && adopt_cpu_storage(*s)) {
              ++storages;
              bytes += static_cast<int64_t>(s->nbytes());
            }
          } catch (const c10::Error&) {  // a wrapper subclass without storage of its own
          }
        }
        return std::make_pair(storages, bytes);
      },
      py::arg("tensors"));
  m.def("cpu_counters", []() {
    const CpuMemoryCounters c = cpu_memory_counters();
    py::dict d;
    d["allocated_bytes"] = c.allocated_bytes;
    d["peak_allocated_bytes"] = c.peak_allocated_bytes;
    d["budget_bytes"] = c.budget_bytes;
    d["failed_allocations"] = c.failed_allocations;
    return d;
  });
  m.def("set_cpu_budget", &set_cpu_budget_bytes, py::arg("bytes"));
  m.def("reset_cpu_peak", &reset_cpu_peak);
  m.def("parse_memory_size", [](const std::string& text, const std::string& name) {
    const MemorySize s = parse_memory_size(text, name);
    return std::make_pair(s.bytes, s.fraction);
  });
  m.def("device_capacity", [](const std::string& device) {
    // a CPU meter installs the counting allocator for good when it is not in charge: in charge for
    // this read only (nothing is measured, so nothing to adopt), the one before given back after
    struct InCharge {
      InCharge() { acquire_cpu_budget_allocator(); }
      ~InCharge() { release_cpu_budget_allocator(); }
    } in_charge;
    return make_memory_meter(resolve_device(device))->capacity_bytes();
  });
  m.def("format_bytes", &format_bytes);
  // the law of a rank's model states under a sharding strategy (search/fixed_cost.h), for shard_plan
  m.def(
      "shard_model_state_bytes",
      [](const std::string& strategy, int64_t parameter_bytes, double state_factor, int64_t largest_unit_bytes,
         int64_t world_size) {
        return shard_model_state_bytes(parse_shard_strategy(strategy), parameter_bytes, state_factor,
                                       largest_unit_bytes, world_size);
      },
      py::arg("strategy"), py::arg("parameter_bytes"), py::arg("state_factor"), py::arg("largest_unit_bytes"),
      py::arg("world_size"));
  m.def(
      "shard_min_world_size",
      [](const std::string& strategy, int64_t parameter_bytes, double state_factor, int64_t largest_unit_bytes,
         int64_t budget_bytes) {
        return shard_min_world_size(parse_shard_strategy(strategy), parameter_bytes, state_factor, largest_unit_bytes,
                                    budget_bytes);
      },
      py::arg("strategy"), py::arg("parameter_bytes"), py::arg("state_factor"), py::arg("largest_unit_bytes"),
      py::arg("budget_bytes"));
  m.def("plan_target", [](const std::string& text) {
    const PlanTarget t = parse_plan_target(text);
    return py::make_tuple(t.name, t.capacity_bytes);
  }, py::arg("text"));
  // the search's defaults: the library's option structs, default-constructed (one place); the
  // Python signatures read them from here, the command line's flags from the same structs
  m.def("defaults", [] {
    const SearchOptions search;
    const ObjectiveOptions objective;
    py::dict d;
    d["strategy"] = to_string(search.strategy);
    d["target_fraction"] = search.target_fraction;
    d["max_batch"] = search.max_batch;
    d["start_batch"] = search.start_batch;
    d["warmup_steps"] = search.warmup_steps;
    d["measure_steps"] = search.measure_steps;
    d["objective"] = to_string(objective.objective);
    d["knee_fraction"] = objective.knee_fraction;
    d["noise_steps"] = objective.noise_steps;
    d["base_batch"] = objective.base_batch;
    // the other calls' defaults, each from the option struct (or constant) the call fills
    const LeakLoopOptions leak;
    d["leak_check"] = py::dict(py::arg("steps") = leak.steps, py::arg("site_steps") = leak.site_steps,
                               py::arg("warmup_steps") = leak.leak.warmup_steps,
                               py::arg("min_bytes_per_step") = leak.leak.min_bytes_per_step);
    const PlanRunOptions plan;
    d["plan_for"] = py::dict(py::arg("batch_a") = plan.batch_a, py::arg("batch_b") = plan.batch_b,
                             py::arg("target_fraction") = plan.target_fraction);
    d["fast_paths"] = py::dict(py::arg("timed_steps") = kFastPathTimedSteps);
    d["monitor"] = py::dict(py::arg("sample_hz") = MonitorOptions{}.sample_hz);
    return d;
  });
  m.def("search", &search, py::arg("run_step"), py::kw_only(), py::arg("device"), py::arg("budget_bytes"),
        py::arg("target_fraction"), py::arg("strategy"), py::arg("max_batch"),
        py::arg("start_batch"), py::arg("warmup_steps"), py::arg("measure_steps"),
        py::arg("objective"), py::arg("knee_fraction"), py::arg("noise_steps"),
        py::arg("base_batch"), py::arg("parameters"),
        py::arg("after_trial") = py::none(), py::arg("name") = "user step", py::arg("optimizer") = "",
        py::arg("monitor") = false, py::arg("on_trial") = py::none(), py::arg("noise") = py::none(),
        py::arg("ranks") = py::none(), py::arg("exact_ranks") = false);
  // one out-of-memory classifier, C++'s (core/oom.h), for the text of any exception
  m.def("choose_config", &choose_config_typed, py::arg("searches"), py::arg("names"), py::arg("required_batch") = 0);
  m.def("zoo_search", &zoo_search, py::kw_only(), py::arg("model"), py::arg("device"), py::arg("memory_budget"),
        py::arg("target_fraction"), py::arg("strategy"), py::arg("max_batch"), py::arg("start_batch"),
        py::arg("measure_steps"), py::arg("objective"), py::arg("knee_fraction"), py::arg("noise_steps"),
        py::arg("base_batch"), py::arg("precision"), py::arg("spec"));
  m.def("zoo_memory", &zoo_memory, py::kw_only(), py::arg("model"), py::arg("device"), py::arg("memory_budget"),
        py::arg("batch"), py::arg("warmup_steps"), py::arg("leak_check_steps"), py::arg("keep_loss"),
        py::arg("precision"), py::arg("spec"));
  m.def("html_report",
        [](const std::string& run_json) { return with_keywords(render_html_report(nlohmann::json::parse(run_json))); },
        py::arg("run_json"));
  // no defaults below: the package passes every keyword, its signatures' defaults from defaults()
  m.def("leak_check", &leak_check, py::arg("run_step"), py::kw_only(), py::arg("device"), py::arg("budget_bytes"),
        py::arg("steps"), py::arg("site_steps"), py::arg("warmup_steps"), py::arg("min_bytes_per_step"));
  m.def("fast_paths", &fast_paths, py::arg("run_step"), py::kw_only(), py::arg("device"), py::arg("batch"),
        py::arg("budget_bytes"), py::arg("timed_steps"), py::arg("parameters"),
        py::arg("after_trial") = py::none(), py::arg("name") = "user step");
  m.def(
      "apply_fast_paths",
      [](const std::string& chosen) { set_process_switches(parse_fast_paths(chosen)); },  // the library's switches
      py::arg("chosen"));
  m.def("plan_for", &plan_for, py::arg("run_step"), py::kw_only(), py::arg("target"), py::arg("device"),
        py::arg("budget_bytes"), py::arg("batch_a"), py::arg("batch_b"), py::arg("target_fraction"),
        py::arg("allocator"), py::arg("parameters"), py::arg("after_trial") = py::none(),
        py::arg("name") = "user step");
  m.def("set_allocation_site",
        [](py::object label) { set_cpu_allocation_site(label.is_none() ? nullptr : intern_site(label.cast<std::string>())); },
        py::arg("label"));
  m.def("is_oom_message", [](const std::string& text) { return is_out_of_memory(std::runtime_error(text)); },
        py::arg("text"));
  m.def("gradient_sq_norm", [](const std::vector<torch::Tensor>& parameters) { return gradient_sq_norm(parameters); },
        py::arg("parameters"), py::call_guard<py::gil_scoped_release>());
  m.def("memory_breakdown", &memory_breakdown, py::arg("run_step"), py::arg("batch"), py::arg("device"),
        py::arg("budget_bytes"), py::arg("parameters"), py::arg("after_trial"), py::arg("name"),
        py::arg("warmup_steps"));
  // issue #26: worst-case batches, token-budget batches, the OOM guard's memory (library parts)
  py::class_<WorstCaseOrder>(m, "WorstCaseOrder")
      .def(py::init<std::vector<int64_t>, const std::string&>(), py::arg("sizes"), py::arg("option") = "data")
      .def_property_readonly("items", &WorstCaseOrder::items)
      .def_property_readonly("largest_size", &WorstCaseOrder::largest_size)
      .def_property_readonly("median_size", &WorstCaseOrder::median_size)
      .def("size_of", &WorstCaseOrder::size_of, py::arg("item"))
      .def("worst_items", &WorstCaseOrder::worst_items, py::arg("batch"))
      .def("median_items", &WorstCaseOrder::median_items, py::arg("batch"));
  m.def(
      "token_budget_batches",
      [](const std::vector<int64_t>& lengths, int64_t max_tokens, int64_t max_items, bool shuffle, uint64_t seed,
         int64_t epoch) {
        TokenBudgetOptions o;
        o.max_tokens = max_tokens;
        o.max_items = max_items;
        o.shuffle = shuffle;
        o.seed = seed;
        return token_budget_batches(lengths, o, epoch);
      },
      py::arg("lengths"), py::kw_only(), py::arg("max_tokens"), py::arg("max_items") = 0, py::arg("shuffle") = true,
      py::arg("seed") = 0, py::arg("epoch") = 0);
  py::class_<MicroBatchMemory>(m, "MicroBatchMemory")
      .def(py::init<>())
      .def("micro_for", &MicroBatchMemory::micro_for, py::arg("rows"), py::arg("length"))
      .def("after_oom", &MicroBatchMemory::after_oom, py::arg("rows"), py::arg("length"), py::arg("micro"))
      .def("after_success", &MicroBatchMemory::after_success, py::arg("rows"), py::arg("length"), py::arg("micro"))
      .def_property_readonly("failed_tokens", &MicroBatchMemory::failed_tokens)
      .def_property_readonly("working_tokens", &MicroBatchMemory::working_tokens);
  py::class_<LoopMonitor>(m, "LoopMonitor")
      .def(py::init<const std::string&, double, int, const std::string&>(), py::arg("device"), py::arg("sample_hz"),
           py::arg("warmup_steps"), py::arg("trace_path"), py::call_guard<py::gil_scoped_release>())
      .def("start", &LoopMonitor::start, py::call_guard<py::gil_scoped_release>())
      .def("step_begin", &LoopMonitor::step_begin, py::call_guard<py::gil_scoped_release>())
      .def("step_end", &LoopMonitor::step_end, py::call_guard<py::gil_scoped_release>())
      .def("stop", &LoopMonitor::stop, py::arg("failed"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("steps", &LoopMonitor::steps)
      .def_property_readonly("timed_steps", &LoopMonitor::timed_steps);
  py::class_<MemoryRegion>(m, "MemoryRegion")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def("enter", &MemoryRegion::enter)
      .def("exit", &MemoryRegion::exit, py::arg("clean"));
  py::class_<PhaseMarker>(m, "PhaseMarker")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def("capture", &PhaseMarker::capture)
      .def("enter", &PhaseMarker::enter)
      .def("exit", &PhaseMarker::exit, py::arg("clean"));
}

// Implements: saturate._saturate, the Python module over the C++ library. It only translates:
// the Python package (python/saturate) holds the API users see, this holds the calls into the
// probe, the search, the memory breakdown and the monitor. A Python step reaches C++ as a
// callable that never raises: it returns None after a step, or (kind, message) after a failure
// whose exception the Python side has already dropped (with its traceback's frames), so that
// no tensor of a failed step outlives it here.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "saturate/core/units.h"
#include "saturate/memory/breakdown.h"
#include "saturate/memory/step_memory.h"
#include "saturate/monitor/compute_observer.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"
#include "saturate/probe/user_step.h"
#include "saturate/report/report.h"
#include "saturate/search/search.h"
#include "saturate/report/memory_text.h"

namespace py = pybind11;

namespace saturate {
namespace {

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
        "the CPU budget allocator is not installed in this process (SATURATE_NO_CPU_ALLOCATOR is set?): "
        "unset it, or search on a CUDA device");
  auto meter = make_memory_meter(device);
  // (the CPU meter reports the machine's RAM without a budget: a search would run until the
  // kernel's OOM killer ends the process)
  if (device.is_cpu() && budget_bytes <= 0 && cpu_memory_counters().budget_bytes <= 0)
    throw UsageError("memory_budget",
                     "a CPU search needs a budget: pass memory_budget='512MiB' (or run it inside "
                     "saturate.cpu_memory_budget('512MiB')), so that out-of-memory happens at that size");
  return meter;
}

/// Puts the budget back as it was before a search or breakdown set one: the CPU budget to its
/// previous value, a CUDA device to its whole memory (the only fraction LibTorch can report).
class BudgetRestore {
 public:
  BudgetRestore(MemoryMeter& meter, bool changed)
      : meter_(meter), changed_(changed), cpu_before_(cpu_memory_counters().budget_bytes) {}
  ~BudgetRestore() {
    if (!changed_) return;
    if (meter_.device().is_cpu()) set_cpu_budget_bytes(cpu_before_);
    else meter_.set_budget_bytes(0);
  }

 private:
  MemoryMeter& meter_;
  bool changed_;
  int64_t cpu_before_;
};

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

std::string search(py::function run_step, const std::string& device, int64_t budget_bytes, double target_fraction,
                   const std::string& strategy, int64_t max_batch, int64_t start_batch, int warmup_steps,
                   int timed_steps, std::vector<torch::Tensor> parameters, py::object after_trial,
                   const std::string& name, const std::string& optimizer, bool monitor, py::object on_trial) {
  if (!(target_fraction > 0 && target_fraction <= 1))
    throw UsageError("target_memory", "target_memory=" + std::to_string(target_fraction) +
                                          " is not a fraction of the budget: give a value in (0, 1], e.g. 0.9");
  if (warmup_steps < 0 || timed_steps < 1)
    throw UsageError("timed_steps", "warmup_steps must be >= 0 and timed_steps >= 1 (got " +
                                        std::to_string(warmup_steps) + " and " + std::to_string(timed_steps) + ")");
  if (max_batch < 0) throw UsageError("max_batch", "max_batch must be positive or None");
  const int64_t params = count_parameters(parameters);
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  // the device's GEMM rate (MFU's denominator), measured before any budget applies
  GemmPeak peak;
  {
    py::gil_scoped_release nogil;
    peak = measure_gemm_peak(step.device(), Precision::kFp32);
    meter->release_cache();
  }
  BudgetRestore restore(*meter, budget_bytes > 0);
  if (budget_bytes > 0) meter->set_budget_bytes(budget_bytes);
  Probe probe(step, *meter);
  ComputeObserver compute(peak.flops_per_s);  // FLOPs counted from the step's operators
  probe.add_observer(&compute);
  std::unique_ptr<MonitorObserver> mon;
  if (monitor) {
    MonitorOptions mo;
    mo.cuda = step.device().is_cuda();
    mo.device_index = step.device().has_index() ? step.device().index() : 0;
    mon = std::make_unique<MonitorObserver>(mo);
    probe.add_observer(mon.get());
  }
  SearchOptions so;
  so.strategy = parse_strategy(strategy);
  so.target_fraction = target_fraction;
  so.max_batch = max_batch;
  so.start_batch = std::max<int64_t>(1, start_batch);
  so.warmup_steps = warmup_steps;
  so.memory_warmup_steps = std::min(warmup_steps, 1);  // 0: each call of the step is a whole loop
  so.measure_steps = timed_steps;
  if (!on_trial.is_none()) {
    SharedFn fn = share(on_trial.cast<py::function>());
    so.on_trial = [fn](const Trial& t) {
      const std::string text = trial_json(t).dump();
      py::gil_scoped_acquire gil;
      try {
        (*fn)(text);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("saturate: on_trial");
      }
    };
  }
  SearchResult r;
  {
    py::gil_scoped_release nogil;
    r = search_batch_size(probe, so);
    if (mon) mon->finish();
  }
  nlohmann::json j = search_json(context_for(step.device(), *meter, name, params, optimizer), r);
  j["compute"] = compute_json(r, peak, std::nullopt);
  return j.dump();
}

std::string memory_breakdown(py::function run_step, int64_t batch, const std::string& device, int64_t budget_bytes,
                             std::vector<torch::Tensor> parameters, py::object after_trial, const std::string& name,
                             int warmup_steps) {
  if (batch < 1) throw UsageError("batch_size", "batch_size=" + std::to_string(batch) + " must be at least 1");
  if (warmup_steps < 0) throw UsageError("warmup_steps", "warmup_steps must be >= 0");
  const std::vector<torch::Tensor> held = parameters;
  UserTrialStep step(wrap_step(share(std::move(run_step))),
                     step_options(device, std::move(parameters), after_trial, name));
  auto meter = make_meter(step.device(), budget_bytes);
  BudgetRestore restore(*meter, budget_bytes > 0);
  if (budget_bytes > 0) meter->set_budget_bytes(budget_bytes);
  StepMemory m;
  {
    py::gil_scoped_release nogil;
    m = measure_step_memory(step, *meter, batch, held, warmup_steps);
  }
  nlohmann::json j = {{"trial", trial_json(m.trial)}, {"budget_bytes", meter->budget_bytes()}};
  if (m.trial.ok()) {
    j["breakdown"] = to_json(m.breakdown);
    j["table"] = breakdown_table(m.breakdown);
  }
  return j.dump();
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
  std::string stop(bool failed) {
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
    j["steps"] = step_;
    j["timed_steps"] = std::max(0, step_ - warmup_);
    j["device"] = device_.str();
    const std::string note = observer_->nvml_note();
    if (!note.empty()) j["nvml_note"] = note;
    return j.dump();
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
  void enter() {
    observer_ = current_phase_observer();
    if (observer_) observer_->phase_begin(phase_);
  }
  void exit(bool clean) {
    if (observer_ && clean) observer_->phase_end(phase_);
    observer_ = nullptr;
  }

 private:
  Phase phase_;
  PhaseObserver* observer_ = nullptr;
};

}  // namespace
}  // namespace saturate

PYBIND11_MODULE(_saturate, m) {
  using namespace saturate;
  m.doc() = "saturate's C++ core (use the `saturate` package, not this module)";
  m.attr("__version__") = SATURATE_VERSION;
  m.attr("libtorch_version") = TORCH_VERSION;

  // usage errors become ValueError, runtime failures RuntimeError
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const PythonStepError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("install_cpu_allocator", &install_cpu_budget_allocator);
  m.def("cpu_allocator_installed", &cpu_budget_allocator_installed);
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
    return make_memory_meter(resolve_device(device))->capacity_bytes();
  });
  m.def("format_bytes", &format_bytes);
  m.def("search", &search, py::arg("run_step"), py::arg("device"), py::arg("budget_bytes"), py::arg("target_fraction"),
        py::arg("strategy"), py::arg("max_batch"), py::arg("start_batch"), py::arg("warmup_steps"),
        py::arg("timed_steps"), py::arg("parameters"), py::arg("after_trial"), py::arg("name"),
        py::arg("optimizer"), py::arg("monitor"), py::arg("on_trial"));
  m.def("memory_breakdown", &memory_breakdown, py::arg("run_step"), py::arg("batch"), py::arg("device"),
        py::arg("budget_bytes"), py::arg("parameters"), py::arg("after_trial"), py::arg("name"),
        py::arg("warmup_steps"));
  py::class_<LoopMonitor>(m, "LoopMonitor")
      .def(py::init<const std::string&, double, int, const std::string&>(), py::arg("device"), py::arg("sample_hz"),
           py::arg("warmup_steps"), py::arg("trace_path"), py::call_guard<py::gil_scoped_release>())
      .def("start", &LoopMonitor::start, py::call_guard<py::gil_scoped_release>())
      .def("step_begin", &LoopMonitor::step_begin, py::call_guard<py::gil_scoped_release>())
      .def("step_end", &LoopMonitor::step_end, py::call_guard<py::gil_scoped_release>())
      .def("stop", &LoopMonitor::stop, py::arg("failed"), py::call_guard<py::gil_scoped_release>());
  py::class_<PhaseMarker>(m, "PhaseMarker")
      .def(py::init<const std::string&>(), py::arg("name"))
      .def("enter", &PhaseMarker::enter)
      .def("exit", &PhaseMarker::exit, py::arg("clean"));
}

// A CPU probe of a small MLP with a MonitorObserver attached, for the monitor's tests.
#pragma once
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/monitor/monitor_observer.h"
#include "saturate/probe/probe.h"

namespace saturate::testing {

struct MonitoredProbe {
  MonitoredProbe(int64_t width, int64_t layers, std::vector<int64_t> input) {
    ModelSpec s;
    s.name = "mlp";
    s.width = width;
    s.layers = layers;
    s.input_shape = std::move(input);
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdam);
    meter->set_budget_bytes(int64_t{1} << 30);
    probe = std::make_unique<Probe>(*workload, *meter);
    MonitorOptions o;
    o.sample_hz = 20;
    monitor = std::make_unique<MonitorObserver>(o);
    probe->add_observer(monitor.get());
  }
  ~MonitoredProbe() { set_cpu_budget_bytes(0); }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  std::unique_ptr<Probe> probe;
  std::unique_ptr<MonitorObserver> monitor;
};

}  // namespace saturate::testing

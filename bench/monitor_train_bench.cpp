// The monitor's cost in training: Trainer runs of the same model with the monitor (phase hooks,
// windows, op counting on the warm-up step, the sampler thread at --sample-hz) and without it,
// alternated within one process (ABBA per round, so drifting load hits both alike), for steps
// of about 0.1, 1 and 10 ms on CPU. Prints a markdown table (bench/results/monitor_overhead.md).
//   saturate_monitor_bench [--rounds 10] [--block-s 0.4] [--sample-hz 10] [--threads 1]
// Only the Trainer's run() is timed: the monitor is made before it (its one-off per-op
// calibration is outside) and finished after it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "saturate/monitor/train_monitor.h"
#include "saturate/train/trainer.h"

using namespace saturate;

namespace {

struct Case {
  const char* name;
  int64_t width, layers, side, batch;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Block {
  double us_per_step = 0;
  nlohmann::json overhead;  // the monitor's own accounting (with it only)
};

bool g_measure_launch = true;

Block run_block(Workload& w, MemoryMeter& meter, TrainData& data, int64_t batch, int64_t steps, double sample_hz,
                bool monitored) {
  std::unique_ptr<TrainMonitor> monitor;
  if (monitored) {
    TrainMonitorOptions o;
    o.monitor.sample_hz = sample_hz;
    o.monitor.measure_launch = g_measure_launch;
    o.global_batch = batch;
    monitor = std::make_unique<TrainMonitor>(o);
  }
  TrainOptions o;
  o.micro_batch = batch;
  o.max_steps = steps;
  o.observer = monitor.get();
  Trainer trainer(w, meter, data, nullptr, o);
  const auto t0 = std::chrono::steady_clock::now();
  trainer.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Block b;
  b.us_per_step = 1e6 * s / static_cast<double>(steps);
  if (monitor) b.overhead = to_json(monitor->finish())["monitor_overhead"];
  return b;
}

/// The hooks alone: a training step's calls (step_begin, five phases, step_end) in a tight
/// loop with no work between them, window closes included; the fastest of several runs, in µs
/// per step. What the monitor adds to each step's critical path, free of the machine's noise.
double hooks_alone_us(double sample_hz) {
  TrainMonitorOptions o;
  o.monitor.sample_hz = sample_hz;
  o.monitor.measure_launch = false;
  TrainMonitor m(o);
  constexpr Phase phases[] = {Phase::kDataWait, Phase::kHostToDevice, Phase::kForward, Phase::kBackward,
                              Phase::kOptimizer};
  constexpr int kSteps = 20000;
  double best = 1e300;
  int step = 0;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kSteps; ++i, ++step) {
      m.step_begin(step, step > 0);
      for (Phase p : phases) {
        m.phase_begin(p);
        m.phase_end(p);
      }
      m.step_end(step, step > 0);
    }
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  m.finish();
  return best / kSteps;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 10, threads = 1;
  double block_s = 0.4, sample_hz = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--rounds") rounds = std::stoi(v);
    else if (a == "--block-s") block_s = std::stod(v);
    else if (a == "--sample-hz") sample_hz = std::stod(v);
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--measure-launch") g_measure_launch = v != "0";
    else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  torch::set_num_threads(threads);
  const std::vector<Case> cases = {{"mlp w8 batch 1 (~0.1 ms)", 8, 1, 4, 1},
                                   {"mlp w128 batch 32 (~1 ms)", 128, 2, 16, 32},
                                   {"mlp w512 batch 128 (~10 ms)", 512, 2, 28, 128}};
  const double hooks_alone = hooks_alone_us(sample_hz);
  std::cout << fmt::format("hooks alone (tight loop, 5 phases, window closes included, fastest of 7 x 20000 steps): "
                           "{:.3f} µs per step\n\n",
                           hooks_alone);
  std::cout << "| workload | steps/block | µs/step without | µs/step with | with/without − 1 (median, IQR) | hooks µs/step "
               "| hooks % of step | hooks alone % of step | sampler CPU % |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Case& c : cases) {
    ModelSpec s;
    s.name = "mlp";
    s.width = c.width;
    s.layers = c.layers;
    s.input_shape = {1, c.side, c.side};
    s.seed = 1;
    auto meter = make_memory_meter(torch::kCPU);
    Workload w(build_model(resolve_model_spec(s)), torch::kCPU, OptimizerKind::kAdam);
    torch::manual_seed(1);
    const int64_t samples = 64 * c.batch;
    TensorTrainData data(torch::randn({samples, 1, c.side, c.side}), torch::randint(10, {samples}), c.batch);
    // steps per block from a short calibration run
    const Block probe = run_block(w, *meter, data, c.batch, 20, sample_hz, false);
    const int64_t steps = std::max<int64_t>(20, static_cast<int64_t>(1e6 * block_s / probe.us_per_step));
    std::vector<double> off, on, ratio, hooks_us, sampler_share;
    for (int r = 0; r < rounds; ++r) {
      const bool on_first = r % 2 == 0;  // ABBA / BAAB
      double sum_on = 0, sum_off = 0;
      for (int k = 0; k < 4; ++k) {
        const bool monitored = (k == 0 || k == 3) == on_first;
        const Block b = run_block(w, *meter, data, c.batch, steps, sample_hz, monitored);
        (monitored ? on : off).push_back(b.us_per_step);
        (monitored ? sum_on : sum_off) += b.us_per_step;
        if (monitored) {
          hooks_us.push_back(b.overhead.value("hooks_us_per_step", 0.0));
          sampler_share.push_back(b.overhead.value("sampler_cpu_share", 0.0));
        }
      }
      ratio.push_back(sum_on / sum_off - 1.0);
    }
    const double step_us = median(off);
    std::cout << fmt::format(
                     "| {} | {} | {:.1f} | {:.1f} | {:+.2f} % ({:+.2f} .. {:+.2f}) | {:.2f} | {:.3f} % | {:.3f} % | {:.3f} % |\n",
                     c.name, steps, step_us, median(on), 100 * median(ratio), 100 * quantile(ratio, 0.25),
                     100 * quantile(ratio, 0.75), median(hooks_us), 100 * median(hooks_us) / step_us,
                     100 * hooks_alone / step_us, 100 * median(sampler_share))
              << std::flush;
  }
  return 0;
}

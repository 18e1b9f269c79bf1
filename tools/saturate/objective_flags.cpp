#include "objective_flags.h"
#include "flag_checks.h"

#include <iostream>

#include <fmt/format.h>

namespace saturate::cli {

void add_objective_flags(CLI::App& app, ObjectiveFlags& f, bool base_batch_flag) {
  app.add_option("--objective", f.objective,
                 "memory: the largest batch under the target | throughput: the knee of the measured samples/s curve | "
                 "goodput: samples/s x statistical efficiency from the gradient noise scale (Pollux)")
      ->capture_default_str();
  app.add_option("--knee", f.knee_fraction,
                 "with --objective throughput: the smallest batch within this fraction of the best samples/s")->check(in_range(0.01, 1, "a fraction of the best samples/s"))
      ->capture_default_str();
  app.add_option("--noise-steps", f.noise_steps,
                 "with --objective goodput: steps that measure the gradient noise scale (learning rate 0, weights "
                 "put back)")->check(in_range(1, 10000, "steps"))
      ->capture_default_str();
  if (base_batch_flag)
    app.add_option("--base-batch", f.base_batch,
                   "with --objective goodput: the batch the learning rate was tuned for (default 32)")->check(in_range(1, 2147483647.0, "a batch"));
}

ObjectiveOptions objective_options(const ObjectiveFlags& f) {
  ObjectiveOptions o;
  o.objective = parse_objective(f.objective);
  o.knee_fraction = f.knee_fraction;
  o.noise_steps = f.noise_steps;
  o.base_batch = f.base_batch;
  o.check();
  return o;
}

ObjectiveProgress objective_progress_lines(const std::string& data) {
  ObjectiveProgress p;
  p.on_curve_start = [](Objective objective, int64_t max_batch) {
    std::cerr << fmt::format("saturate: --objective {}: timing samples/s at log-spaced batches up to {}\n",
                             to_string(objective), max_batch);
  };
  p.on_point = [](const ThroughputPoint& p) {
    if (p.ok)
      std::cerr << fmt::format("  curve batch {:>6}  {:>10.1f} samples/s  +-{:.1f} %  ({} rounds{})\n", p.batch,
                               p.samples_per_s, 100 * p.rel_std_error, p.rounds, p.settled ? "" : ", not settled");
    else
      std::cerr << fmt::format("  curve batch {:>6}  failed: {}\n", p.batch, p.error);
  };
  p.on_noise_start = [data](int64_t batch, int steps) {
    std::cerr << fmt::format("saturate: measuring the gradient noise scale on {}: {} steps of batch {} in two halves\n",
                             data, steps, batch);
  };
  return p;
}

}  // namespace saturate::cli

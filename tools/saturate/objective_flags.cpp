#include "objective_flags.h"
#include "option_flags.h"

namespace saturate::cli {

void add_objective_flags(CLI::App& app, ObjectiveFlags& f, bool base_batch_flag) {
  add_option_flag(app, "objective", f.objective);
  add_option_flag(app, "knee_fraction", f.knee_fraction);
  add_option_flag(app, "noise_steps", f.noise_steps);
  if (base_batch_flag) add_option_flag(app, "search.base_batch", f.base_batch);
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

}  // namespace saturate::cli

#include "data_flags.h"
#include "flag_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <unistd.h>

#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate::cli {

void add_data_flags(CLI::App& app, DataFlags& f) {
  // the defaults shown are the flags' values now: a command sets its own before calling this
  app.add_option("--data", f.data,
                 std::string("real inputs through the loader: fashion-mnist | idx:DIR | cifar10:DIR | cifar100:DIR | "
                             "images:DIR | wds:DIR|GLOB | synthetic") +
                     (f.data.empty() ? " (default: none, synthetic batches made on the device)" : ""))
      ->capture_default_str()->envname("SATURATE_DATA");
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  app.add_option("--workers", f.workers,
                 "--data: loader threads, N or auto (add workers while the step waits on data)")
      ->capture_default_str()->envname("SATURATE_WORKERS")
      ->check(CLI::Validator(
          [cores](std::string& text) -> std::string {
            if (text == "auto") return "";
            const std::string range = fmt::format("0..{}", max_threads());
            size_t used = 0;
            long long n = -1;
            try {
              n = std::stoll(text, &used);
            } catch (const std::exception&) {
              used = 0;
            }
            if (used != text.size() || used == 0)
              return fmt::format("'{}' is not a count of loader threads; give auto or N in {}", text, range);
            if (n < 0 || n > max_threads())
              return fmt::format("{} is outside {} (loader threads; at most 4 per core on this machine's {}); or auto",
                                 text, range, cores);
            return "";
          },
          "N|auto"));
  app.add_option("--prefetch", f.prefetch, "--data: batches each worker loads ahead")->check(in_range(1, 1024, "batches per worker"))->capture_default_str();
  app.add_flag("--drop-last", f.drop_last, "--data: drop each epoch's last partial batch");
  app.add_flag("--skip-bad-samples", f.skip_bad_samples,
               "--data: skip and count corrupt samples instead of stopping at the first");
  app.add_flag("--no-augment", f.no_augment, "--data: no random crop and flip (normalization stays)");
  app.add_option("--val-fraction", f.val_fraction_arg,
                 "--data images:DIR|wds:...: hold out this share of the samples (in [0, 1), by a hash of each "
                 "sample's key) as a val split that training evaluates on and never trains on")
      ->capture_default_str();
}

namespace {

double parse_val_fraction(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || errno == ERANGE || !std::isfinite(v))
    throw UsageError(fmt::format("--val-fraction: '{}' is not a number; give a share in [0, 1) such as 0.1 (0: hold "
                                 "nothing out)",
                                 text));
  if (v < 0 || v >= 1)
    throw UsageError(fmt::format("--val-fraction: {} is outside [0, 1); give a share such as 0.1 (0: hold nothing out)",
                                 text));
  return v;
}

}  // namespace

WorkloadFlags with_data_shape(DataFlags& f, const WorkloadFlags& workload) {
  WorkloadFlags w = workload;
  f.val_fraction = parse_val_fraction(f.val_fraction_arg);
  if (f.data.empty()) {
    if (f.val_fraction > 0)
      throw UsageError(fmt::format("--val-fraction {} needs --data images:DIR or wds:DIR|GLOB (the samples it holds "
                                   "out)",
                                   f.val_fraction_arg));
    return w;
  }
  if (f.workers != "auto") {
    try {
      size_t used = 0;
      const int n = std::stoi(f.workers, &used);
      if (used != f.workers.size() || n < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--workers: '{}' is neither a count (0, 1, 2, ...) nor auto", f.workers));
    }
  }
  if (f.prefetch < 1) throw UsageError(fmt::format("--prefetch: {} must be at least 1", f.prefetch));
  if (w.tokens || w.model == "gpt")
    throw UsageError("--data feeds image classifiers; '" + w.model + "' takes token ids (drop --data)");
  DatasetOptions o;
  o.skip_bad_samples = f.skip_bad_samples;
  o.seed = w.seed;
  o.val_fraction = f.val_fraction;  // the train split: without the held-out samples
  if (f.data == "synthetic" && !w.input.empty()) {
    // the model's shape, as the synthetic batches have
    int64_t c = 0, h = 0, wd = 0;
    if (std::sscanf(w.input.c_str(), "%ldx%ldx%ld", &c, &h, &wd) == 3) o.synthetic_shape = {c, h, wd};
  }
  if (f.data == "synthetic" && w.classes > 0) o.synthetic_classes = w.classes;
  f.dataset = open_dataset(f.data, o);
  const SampleShape s = f.dataset->shape();
  if (w.input.empty()) w.input = to_string(s);
  if (w.classes <= 0) w.classes = f.dataset->classes();
  if (f.dataset->classes() > w.classes)
    throw UsageError(fmt::format("--data {} has {} classes but --classes is {}; give --classes {} or more", f.data,
                                 f.dataset->classes(), w.classes, f.dataset->classes()));
  return w;
}

std::unique_ptr<DataAttachment> attach_data(DataFlags& f, Probe& probe, const Session& session, int64_t tune_batch,
                                            bool quiet) {
  if (f.data.empty()) return nullptr;
  auto a = std::make_unique<DataAttachment>();
  LoaderOptions o;
  o.prefetch = f.prefetch;
  o.drop_last = f.drop_last;
  o.skip_bad_samples = f.skip_bad_samples;
  o.augment_enabled = !f.no_augment;
  o.seed = session.workload->built().spec.seed;
  o.classes = session.workload->built().classes;
  const auto& shape = session.workload->built().sample_shape;
  if (shape.size() == 3) o.shape = {shape[0], shape[1], shape[2]};
  else if (shape.size() == 2) o.shape = {1, shape[0], shape[1]};
  else
    throw UsageError(fmt::format("--data gives images [C, H, W]; the model's input {} is not one (use --input CxHxW)",
                                 session.context.input));
  const bool automatic = f.workers == "auto";
  o.workers = automatic ? 1 : std::stoi(f.workers);
  a->feed = std::make_unique<DataFeed>(f.dataset, o, session.device);
  probe.set_batch_source(a->feed.get());
  probe.add_observer(a->feed.get());
  if (!quiet)
    std::cerr << fmt::format("saturate: data {}: {} samples of {}, {} classes\n", f.dataset->name(), f.dataset->size(),
                             to_string(f.dataset->shape()), f.dataset->classes());
  if (automatic) {
    WorkerTuningOptions t;
    if (!quiet)
      t.on_point = [](const WorkerCurvePoint& p) {
        std::cerr << fmt::format("saturate: --workers auto: {} worker(s): {:.1f} samples/s, data wait {:.1f} % of the step\n",
                                 p.workers, p.samples_per_s, 100 * p.data_wait_fraction);
      };
    const WorkerTuning tuning = tune_workers(probe, *a->feed, tune_batch, t);
    a->workers_note = "auto: " + tuning.reason;
    a->feed->report_worker_tuning(tuning);
    if (!quiet) std::cerr << fmt::format("saturate: --workers auto chose {} ({})\n", tuning.workers, tuning.reason);
  }
  return a;
}

DataSource data_source(const DataAttachment& data) {
  const Dataset& d = data.feed->dataset();
  return DataSource{d.name(), d.size(), d.classes(), data.feed->skipped(), data.workers_note};
}

void rethrow_data_error(const DataAttachment* data) {
  if (data && data->feed->error()) std::rethrow_exception(data->feed->error());
}

}  // namespace saturate::cli

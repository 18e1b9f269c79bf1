// Implements: real data for the probe. DataFeed is the probe's BatchSource (batches from the
// loader, exactly `batch` samples each, copied to the device: pinned memory and a non-blocking
// copy on a side stream on CUDA) and a ProbeObserver that writes what the data cost next to the
// step time: data_wait_ms, data_wait_fraction, workers (trial.findings.data, so in the JSON).
// tune_workers is `--workers auto`: start low, add workers while the step still waits on data
// and cores are free; stop when the wait is under 2 % of the step or a worker no longer helps.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "saturate/data/loader.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/probe/trial.h"

namespace saturate {

/// What the data cost during one trial's measured steps.
struct DataTrialStats {
  int workers = 0;
  int64_t measured_steps = 0;
  double data_wait_ms = 0;        ///< mean per measured step
  double data_wait_fraction = 0;  ///< total wait / total step time over the measured steps
  double step_ms = 0;             ///< mean step time as the feed saw it
  int64_t skipped_samples = 0;    ///< bad samples skipped (opening + loading), so far
};

class DataFeed final : public BatchSource, public ProbeObserver {
 public:
  /// `options.batch_size` is replaced by each trial's batch; `device` is where batches go.
  DataFeed(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device);
  ~DataFeed() override;

  /// Takes effect at the next trial (reset).
  void set_workers(int workers) { options_.workers = workers; }
  int workers() const { return options_.workers; }
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }
  /// Reported in the next trial's findings once (the --workers auto curve).
  void report_worker_tuning(WorkerTuning tuning) { worker_tuning_ = std::move(tuning); }
  const DataTrialStats& last() const { return last_; }
  /// Skipped samples with their first reasons: while opening, and in the current trial.
  SkipReport skipped() const;
  /// The DataError that stopped the last trial, if one did (the probe records it as a failed
  /// trial; the command line rethrows it so that bad data exits as a usage error).
  std::exception_ptr error() const { return error_; }

  // BatchSource
  Batch next(int64_t batch) override;
  void reset(int64_t batch) override;
  // ProbeObserver
  void trial_begin(int64_t batch) override;
  void step_begin(int step, bool measured) override;
  void step_end(int step, bool measured) override;
  void trial_end(Trial& trial) override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  torch::Device device_;
  std::unique_ptr<Loader> loader_;
  torch::Tensor carry_inputs_, carry_targets_;  // samples left over from a batch cut to size
  std::exception_ptr error_;
  std::optional<WorkerTuning> worker_tuning_;
  // this trial
  bool measured_ = false;
  double step_wait_ms_ = 0;
  double wait_ms_total_ = 0, step_ms_total_ = 0;
  int64_t measured_steps_ = 0;
  std::chrono::steady_clock::time_point step_start_;
  DataTrialStats last_;
};

struct WorkerTuningOptions {
  int max_workers = 0;            ///< 0: the cores left beside the training thread (at least 1)
  double wait_fraction = 0.02;    ///< stop when the step waits less than this
  double min_gain = 0.03;         ///< a worker must add this much samples/s to count as helping
  int warmup_steps = 2;
  int measure_steps = 6;
  /// Called after each count is measured (progress); may be empty.
  std::function<void(const WorkerCurvePoint&)> on_point;
};

/// The search itself: `measure(w)` measures w workers. Starts at 1 and adds workers (one at a
/// time up to 4, then half as many again) until the wait is under `wait_fraction`, a worker adds
/// less than `min_gain`, or `max_workers` is reached.
WorkerTuning choose_workers(const std::function<WorkerCurvePoint(int)>& measure, const WorkerTuningOptions& options);

/// Runs trials of `batch` at growing worker counts through `runner` (a Probe that `feed` is
/// attached to), leaves the choice set on the feed and returns it with the curve. A trial that runs
/// out of memory ends the tuning at the last count that did not (1 when none did: the batch itself
/// does not fit, which the caller's own run reports); any other failure throws RuntimeFailure
/// (the message says which and why).
WorkerTuning tune_workers(TrialRunner& runner, DataFeed& feed, int64_t batch, const WorkerTuningOptions& options = {});

}  // namespace saturate

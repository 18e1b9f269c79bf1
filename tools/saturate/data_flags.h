// The input-pipeline flags on probe/search (--data, --workers, --prefetch, --drop-last,
// --skip-bad-samples, --no-augment, --val-fraction) and attaching the loader to a probe.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/data/data_feed.h"
#include "saturate/probe/probe.h"
#include "saturate/report/data_text.h"

namespace saturate::cli {

struct DataFlags {
  std::string data;  // empty: synthetic batches made on the device (no loader)
  std::string workers = "auto";
  int prefetch = 2;
  bool drop_last = false;
  bool skip_bad_samples = false;
  bool no_augment = false;
  std::string val_fraction_arg = "0";  // --val-fraction as given
  double val_fraction = 0;             // parsed by with_data_shape: the share held out (images:, wds:)
  std::shared_ptr<Dataset> dataset;  // opened by with_data_shape (the train split)
};
void add_data_flags(CLI::App& app, DataFlags& f);

/// Opens --data (usage errors before any device work) and returns the workload flags with
/// --input and --classes taken from the data when they were not given.
WorkloadFlags with_data_shape(DataFlags& f, const WorkloadFlags& workload);

struct DataAttachment {
  std::unique_ptr<DataFeed> feed;
  std::string workers_note;  // "auto: ..." when --workers auto chose
};
/// The loader as `probe`'s batch source and observer (nullptr without --data). With
/// --workers auto, tunes at `tune_batch` first, printing the curve on stderr unless `quiet`.
std::unique_ptr<DataAttachment> attach_data(DataFlags& f, Probe& probe, const Session& session, int64_t tune_batch,
                                            bool quiet);

/// The dataset, the skips so far and the workers note, for report/data_text.h's printers.
DataSource data_source(const DataAttachment& data);

/// A bad sample stops a trial as an error; rethrow it as the DataError it is (exit status 2).
void rethrow_data_error(const DataAttachment* data);

}  // namespace saturate::cli

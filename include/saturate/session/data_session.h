// Implements: the user's data for a session (`data`, `workers`, `prefetch`, ... on probe, search
// and train; core/option_doc.h documents each): opened once, before any device work, so that its
// errors name the option; the model's input shape and classes taken from it where unset; the
// loader attached to a probe as its batch source (with `workers` auto tuned while the step waits
// on data); and the data a training run reads (token text, or samples and their held-out split).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "saturate/data/data_events.h"
#include "saturate/data/data_feed.h"
#include "saturate/data/dataset.h"
#include "saturate/probe/probe.h"
#include "saturate/report/data_text.h"
#include "saturate/session/train_session.h"
#include "saturate/session/workload_session.h"

namespace saturate {

struct DataOptions {
  /// data: fashion-mnist | idx:DIR | cifar10:DIR | cifar100:DIR | images:DIR | wds:DIR|GLOB |
  /// synthetic | tokens:FILE (token models); "": no loader, synthetic batches made on the device.
  std::string data;
  /// workers: loader threads, N in 0..max_loader_threads() or auto (tuned on the step).
  std::string workers = "auto";
  int prefetch = 2;  ///< batches each worker loads ahead, 1..1024
  bool drop_last = false;
  bool skip_bad_samples = false;
  bool no_augment = false;
  /// val_fraction as given: a share in [0, 1) of images:/wds: samples held out by a hash of
  /// each key; "0": none (token text: its last 10 %).
  std::string val_fraction = "0";
};

/// The most loader threads `workers` may ask for: 4 per core of this machine.
int max_loader_threads();
/// `workers` as a count, or -1 for auto; a UsageError about `workers` otherwise.
int parse_workers(const std::string& text);
/// `val_fraction` as a share in [0, 1); a UsageError about `val_fraction` otherwise.
double parse_val_fraction(const std::string& text);

/// The data opened: its train split (nullptr without data), the share held out and the workers.
struct OpenedData {
  std::shared_ptr<Dataset> dataset;
  std::string text;  ///< `data` text:FILE (a token model's documents, read by the session using them)
  /// `data` tokens:FILE for a search, probe or memory run: fixed windows of seq_len tokens, the
  /// shape of the synthetic token batches the trials run (the memory is the same; train reads the file).
  std::string tokens;
  double val_fraction = 0;
  int workers = -1;  ///< -1: auto
};
/// Opens `options.data` for an image model, filling `workload`'s input shape and classes from it
/// where they are unset. Usage errors (naming the option) before any device work.
OpenedData open_data(const DataOptions& options, WorkloadOptions& workload);


struct DataAttachment {
  std::unique_ptr<DataFeed> feed;
  std::string workers_note;  ///< "auto: ..." when `workers` auto chose
  /// The dataset, the skips so far and the workers note, for report/data_text.h.
  DataSource source() const;
  /// A bad sample stops a trial as an error: rethrows it as the DataError it is.
  void rethrow_error() const;
};
/// The loader of `data` as `probe`'s batch source and observer (nullptr without data); with
/// `workers` auto, tuned at `tune_batch` first.
std::unique_ptr<DataAttachment> attach_data(const OpenedData& data, const DataOptions& options, Probe& probe,
                                            const WorkloadSession& session, int64_t tune_batch,
                                            const DataEvents& events = {});

/// The model takes token ids: gpt, or a TorchScript file with `tokens` (or `seq_len`, `vocab`).
bool takes_tokens(const ModelSpec& model);
/// A training run reads token text (tokens:FILE, or synthetic tokens for a token model); a
/// UsageError when token data is given to an image model.
bool trains_on_tokens(const DataOptions& options, const ModelSpec& model);
/// tokens:FILE and text:FILE are byte-level (token ids 0..255): a token model given no `vocab`
/// gets 256, not the zoo's default 8192 (whose first loss would be ln 8192, not ln 256).
void byte_level_vocab(const DataOptions& options, ModelSpec& model);
/// `data` text:FILE's documents, split as training splits them (`val_fraction`, default 0.1).
TextCorpus open_text_data(const DataOptions& options, int64_t seq_len);
/// UsageError naming `vocab` when a model's vocabulary cannot hold text's 256 byte ids.
void check_text_vocab(const std::string& data, int64_t vocab);
/// What a training run reads: token text with its held-out end, or the samples of `opened` with
/// the data's test split or the samples `val_fraction` holds out; `note` says why there is no
/// evaluation when there is none, and that `workers` auto keeps 2 loader threads in training.
TrainSessionData train_session_data(const DataOptions& options, const OpenedData& opened, bool tokens,
                                    int64_t seq_len, std::string& note);

}  // namespace saturate

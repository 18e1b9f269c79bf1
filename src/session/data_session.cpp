#include "saturate/session/data_session.h"

#include "saturate/models/zoo.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/session/workload_session.h"
#include "saturate/core/units.h"
#include "saturate/core/option_doc.h"
#include "saturate/data/text_data.h"
#include "saturate/data/token_data.h"

namespace saturate {

int max_loader_threads() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(4 * (cores > 0 ? cores : 1));
}

int parse_workers(const std::string& text) {
  if (text == "auto") return -1;
  const std::string range = fmt::format("0..{}", max_loader_threads());
  const std::optional<long long> parsed = parse_whole_number(text);
  if (!parsed)
    throw UsageError("workers",
                     fmt::format("'{}' is not a count of loader threads; give auto or N in {}", text, range));
  const long long n = *parsed;
  if (n < 0 || n > max_loader_threads())
    throw UsageError("workers", fmt::format("{} is outside {} (loader threads; at most 4 per core on this machine's "
                                            "{}); or auto",
                                            text, range, max_loader_threads() / 4));
  return static_cast<int>(n);
}

double parse_val_fraction(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || errno == ERANGE || !std::isfinite(v))
    throw UsageError("val_fraction", fmt::format("'{}' is not a number; give a share in [0, 1) such as 0.1 (0: hold "
                                                 "nothing out)",
                                                 text));
  if (v < 0 || v >= 1)
    throw UsageError("val_fraction",
                     fmt::format("{} is outside [0, 1); give a share such as 0.1 (0: hold nothing out)", text));
  return v;
}

OpenedData open_data(const DataOptions& f, WorkloadOptions& workload) {
  OpenedData opened;
  opened.val_fraction = parse_val_fraction(f.val_fraction);
  if (f.data.empty()) {
    if (opened.val_fraction > 0)
      throw UsageError(fmt::format("`val_fraction` {} needs `data` images:DIR or wds:DIR|GLOB (the samples it holds "
                                   "out)",
                                   f.val_fraction));
    return opened;
  }
  opened.workers = parse_workers(f.workers);
  byte_level_vocab(f, workload.model);
  if (is_text_data(f.data)) {  // documents for a token model: read by the session that uses them
    if (!takes_tokens(workload.model))
      throw UsageError(fmt::format("`data` {}: text feeds token models (gpt, or a TorchScript file with `tokens`); "
                                   "{} takes images",
                                   f.data, workload.model.name));
    opened.text = f.data;
    return opened;
  }
  if (is_token_data(f.data)) {  // fixed windows of seq_len tokens: the trials' synthetic token batches have their shape
    if (!takes_tokens(workload.model))
      throw UsageError(fmt::format("`data` {}: tokens feed token models (gpt, or a TorchScript file with `tokens`); "
                                   "{} takes images",
                                   f.data, workload.model.name));
    const std::string path = f.data.substr(std::string("tokens:").size());
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), R_OK) != 0)
      throw UsageError(fmt::format("`data` {}: not a readable regular file; give the corpus's path", f.data));
    opened.tokens = f.data;
    return opened;
  }
  if (f.prefetch < 1) throw UsageError("prefetch", fmt::format("{} must be at least 1", f.prefetch));
  ModelSpec& m = workload.model;
  if (m.tokens || m.name == "gpt")
    throw UsageError("`data` feeds image classifiers; '" + m.name + "' takes token ids (drop `data`)");
  DatasetOptions o;
  o.skip_bad_samples = f.skip_bad_samples;
  o.seed = m.seed;
  o.val_fraction = opened.val_fraction;  // the train split: without the held-out samples
  // on a CPU run the budget bounds what the dataset holds too (its tables, shards read whole)
  if (workload.device == "cpu" || (workload.device == "auto" && !cuda_available())) {
    const MemorySize b = parse_memory_size(workload.memory_budget.empty() ? "4GiB" : rank_budget(workload.memory_budget),
                                           "`memory_budget`");
    o.held_budget_bytes = b.is_fraction() ? 0 : b.bytes;
  }
  // synthetic data takes the model's natural shape (resnet 3x224x224) unless `input` says otherwise
  if (f.data == "synthetic" && m.input_shape.empty() && !is_model_file(m.name))
    m.input_shape = resolve_model_spec(m).input_shape;
  if (f.data == "synthetic" && m.input_shape.size() == 3)  // the model's shape, as the synthetic batches have
    o.synthetic_shape = {m.input_shape[0], m.input_shape[1], m.input_shape[2]};
  if (f.data == "synthetic" && m.classes > 0) o.synthetic_classes = m.classes;
  opened.dataset = open_dataset(f.data, o);
  const SampleShape s = opened.dataset->shape();
  if (m.input_shape.empty() && m.name.rfind("resnet", 0) == 0 && (s.height < 32 || s.width < 32))
    throw UsageError("data", fmt::format("{} gives {}x{}x{} images, and {} downsamples 32x: it needs images of at "
                                         "least 32x32 (its own shape is 3x224x224); give `data` synthetic (random "
                                         "images of the model's shape), or a dataset of larger images (cifar10:DIR, "
                                         "images:DIR)",
                                         f.data, s.channels, s.height, s.width, m.name));
  if (m.input_shape.empty()) m.input_shape = {s.channels, s.height, s.width};
  if (m.classes <= 0) m.classes = opened.dataset->classes();
  if (opened.dataset->classes() > m.classes)
    throw UsageError(fmt::format("`data` {} has {} classes but `classes` is {}; give `classes` {} or more", f.data,
                                 opened.dataset->classes(), m.classes, opened.dataset->classes()));
  return opened;
}

DataSource DataAttachment::source() const {
  const Dataset& d = feed->dataset();
  return DataSource{d.name(), d.size(), d.classes(), feed->skipped(), workers_note};
}

void DataAttachment::rethrow_error() const {
  if (feed->error()) std::rethrow_exception(feed->error());
}

std::unique_ptr<DataAttachment> attach_data(const OpenedData& data, const DataOptions& f, Probe& probe,
                                            const WorkloadSession& session, int64_t tune_batch,
                                            const DataEvents& events) {
  if (!data.dataset) return nullptr;
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
    throw UsageError(fmt::format("`data` gives images [C, H, W]; the model's input {} is not one (use `input` CxHxW)",
                                 session.context.input));
  const bool automatic = data.workers < 0;
  o.workers = automatic ? 1 : data.workers;
  a->feed = std::make_unique<DataFeed>(data.dataset, o, session.device);
  probe.set_batch_source(a->feed.get());
  probe.add_observer(a->feed.get());
  if (events.on_open) events.on_open(*data.dataset);
  if (automatic) {
    WorkerTuningOptions t;
    t.on_point = events.on_workers_point;
    const WorkerTuning tuning = tune_workers(probe, *a->feed, tune_batch, t);
    a->workers_note = "auto: " + tuning.reason;
    a->feed->report_worker_tuning(tuning);
    if (events.on_workers_chosen) events.on_workers_chosen(tuning);
  }
  return a;
}

bool takes_tokens(const ModelSpec& m) { return m.tokens || m.name == "gpt" || m.seq_len > 0 || m.vocab > 0; }

void byte_level_vocab(const DataOptions& options, ModelSpec& model) {
  if ((is_token_data(options.data) || is_text_data(options.data)) && takes_tokens(model) && model.vocab == 0)
    model.vocab = 256;
}

bool trains_on_tokens(const DataOptions& options, const ModelSpec& model) {
  const bool tokens = is_token_data(options.data) || is_text_data(options.data) ||
                      (takes_tokens(model) && options.data == "synthetic");
  if (tokens && !takes_tokens(model))
    throw UsageError(fmt::format("`data` {}: token data feeds token models (gpt, or a TorchScript file with "
                                 "`tokens`); {} takes images",
                                 options.data, model.name));
  return tokens;
}

namespace {

/// `val_fraction` for tokens:FILE: the held-out end of the text (default 0.1, so that a language
/// model is evaluated on text it never trained on).
double token_val_fraction(const std::string& arg) {
  if (arg == "0") return 0.1;
  try {
    size_t used = 0;
    const double f = std::stod(arg, &used);
    if (used == arg.size()) return f;
  } catch (const std::exception&) {
  }
  throw UsageError("val_fraction",
                   fmt::format("'{}' is not a number; give a fraction in [0, 1) such as 0.1", arg));
}

}  // namespace

void check_text_vocab(const std::string& data, int64_t vocab) {
  if (vocab < 256)
    throw UsageError(fmt::format("`vocab` {}: `data` {} is byte-level (256 token ids); give `vocab` 256 or more", vocab,
                                 data));
}

TextCorpus open_text_data(const DataOptions& f, int64_t seq_len) {
  return read_text_corpus(f.data.substr(5), token_val_fraction(f.val_fraction), seq_len);
}

TrainSessionData train_session_data(const DataOptions& f, const OpenedData& opened, bool tokens, int64_t seq_len,
                                    std::string& note) {
  TrainSessionData d;
  d.tokens = tokens;
  const int workers = parse_workers(f.workers);
  d.workers = workers < 0 ? 2 : workers;
  d.workers_auto = workers < 0 && !tokens;  // timed at the micro-batch before training (token data has no loader threads)
  d.prefetch = f.prefetch;
  d.skip_bad_samples = f.skip_bad_samples;
  d.augment = !f.no_augment;
  d.data = f.data;
  d.val_fraction = f.val_fraction;
  d.drop_last = f.drop_last;
  if (tokens) {
    if (is_token_data(f.data)) d.corpus = read_token_corpus(f.data.substr(7), token_val_fraction(f.val_fraction), seq_len);
    if (is_text_data(f.data)) d.text = open_text_data(f, seq_len);
    return d;
  }
  d.train = opened.dataset;
  HeldOut held_out = open_held_out(f.data, opened.val_fraction, f.skip_bad_samples);
  d.held_out = std::move(held_out.dataset);
  d.held_out_split = held_out.split;
  if (!d.held_out) note = note.empty() ? held_out.note : note + "; " + held_out.note;
  return d;
}

}  // namespace saturate

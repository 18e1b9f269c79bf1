#include "saturate/session/train_session.h"

#include "session/run_settings.h"
#include "train/checkpoint_file.h"

#include <algorithm>
#include <numeric>
#include <filesystem>
#include <functional>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/option_text.h"
#include "core/signal_name.h"
#include "saturate/core/units.h"
#include "saturate/data/data_feed.h"
#include "saturate/dist/rank_synced.h"
#include "saturate/memory/leak_check.h"
#include "saturate/monitor/op_profile.h"
#include "saturate/monitor/train_monitor.h"
#include "saturate/probe/probe.h"
#include "saturate/session/data_session.h"
#include "session/objective_session.h"
#include "saturate/step/model_snapshot.h"
#include "saturate/train/adaptive_batch.h"
#include "saturate/data/batch_plan.h"
#include "train/eta.h"
#include "data/loader_data.h"
#include "models/flops.h"
#include "saturate/monitor/gemm_peak.h"
#include "saturate/report/train_text.h"
#include "saturate/session/workload_search.h"

namespace saturate {
namespace {

/// The compute of a run (FLOPs counted, the rate sustained, MFU against the device's measured
/// GEMM rate); nullopt when it counted no FLOPs.
std::optional<TrainCompute> train_compute(Workload& workload, MemoryMeter& meter, const TrainOptions& o,
                                          const TrainResult& r, int world) {
  if (r.flops_per_step <= 0 || r.flops_counted_batch <= 0) return std::nullopt;
  TrainCompute c;
  c.flops_per_sample = r.flops_per_step / static_cast<double>(r.flops_counted_batch);
  GemmPeak peak = gemm_peak_outside_budget(meter, workload.device(), o.precision, o.fast_paths);
  c.achieved_flops_per_s = c.flops_per_sample * r.samples_per_s;
  if (const auto analytic = analytic_flops(workload.built().spec)) c.analytic_flops_per_sample = analytic->training_per_sample;
  // samples/s are the whole job's: against the peak of every rank's device; measured again when
  // the run outran it (a peak taken under load)
  c.mfu = checked_mfu(c.achieved_flops_per_s / std::max(1, world), peak,
                      [&] { return gemm_peak_outside_budget(meter, workload.device(), o.precision, o.fast_paths, true); },
                      &c.mfu_note);
  c.peak_flops_per_s = peak.flops_per_s;
  c.peak_method = peak.method();
  return c;
}

constexpr int64_t kMaxBatch = std::numeric_limits<int32_t>::max();

bool chooses_global_batch(const TrainSessionOptions& o) {
  return o.objective.objective == Objective::kGoodput || o.adaptive;
}

int64_t base_batch_of(const TrainSessionOptions& o) { return o.base_batch.value_or(kDefaultBaseBatch); }

/// The share of the budget a searched batch's peak may use: as given, else all of it on CPU (the
/// budget is exact), 0.95 on CUDA (fragmentation).
double target_fraction_of(const TrainSessionOptions& o, const MemoryMeter& meter) {
  return o.target_fraction.value_or(meter.device().is_cuda() ? 0.95 : 1.0);
}

/// The loader's options for this workload: the model's sample shape (1x28x28 images fed to a
/// 3x32x32 model are converted the same way in the search and in training) and classes.
LoaderOptions loader_options(const Workload& workload, const TrainSessionData& data, uint64_t seed,
                             const c10::Device& device) {
  LoaderOptions lo;
  lo.workers = data.workers;
  lo.prefetch = data.prefetch;
  lo.skip_bad_samples = data.skip_bad_samples;
  lo.augment_enabled = data.augment;
  lo.seed = seed;
  lo.device = device;
  const auto& sample = workload.built().sample_shape;
  if (sample.size() == 3) lo.shape = {sample[0], sample[1], sample[2]};
  else if (sample.size() == 2) lo.shape = {1, sample[0], sample[1]};
  // a flat input takes the images as they are: their values must be as many as it takes
  else if (const SampleShape d = data.train ? data.train->shape() : SampleShape{};
           sample.size() == 1 && !d.empty() && !data.tokens && d.numel() != sample[0])
    throw UsageError(fmt::format("`data` {} gives samples of {} = {} values; the model's input {} takes {} (use "
                                 "`input` CxHxW to resize the images, or leave `input` out to take the data's)",
                                 data.train->name(), to_string(d), d.numel(), format_shape(sample), sample[0]));
  lo.classes = workload.built().classes;
  return lo;
}

/// Batches of the training data for the noise scale (objective goodput): the data's own stream
/// at the batch asked for, in one process, without workers.
struct NoiseBatches {
  std::function<Batch(int64_t)> next;
  std::string name;
};
NoiseBatches noise_batches(const TrainSessionData& data, Workload& workload, uint64_t seed, const c10::Device& device) {
  auto held = std::make_shared<std::unique_ptr<TrainData>>();
  auto step = std::make_shared<int64_t>(0);
  auto batch = std::make_shared<int64_t>(0);
  LoaderOptions lo = loader_options(workload, data, seed, device);
  lo.workers = 0;
  const int64_t seq_len = workload.built().spec.seq_len, vocab = workload.built().classes;
  NoiseBatches out;
  out.name = data.text_documents()    ? data.text.name
             : data.tokens             ? (data.corpus.train.defined() ? std::string("the token file")
                                                                      : std::string("synthetic tokens"))
                                       : data.train->name();
  out.next = [=, &data](int64_t b) {
    if (!*held || *batch != b) {
      if (data.text_documents()) {
        *held = std::make_unique<TextTrainData>(data.text, b, seed);
      } else if (data.tokens) {
        *held = std::make_unique<TokenTrainData>(data.corpus, seq_len, vocab, b, seed);
      } else {
        LoaderOptions o = lo;
        o.batch_size = b;
        *held = std::make_unique<LoaderTrainData>(data.train, o);
      }
      *batch = b;
      *step = 0;
    }
    return (*held)->batch_for_step((*step)++);
  };
  return out;
}

/// The step training will run: precision, checkpointing, clipping, a whole global batch in
/// micro-batches, the loader's prefetched batches, the evaluation.
TrainingFootprint training_footprint(const TrainSessionOptions& o, const TrainSessionData& data, bool eval_searched) {
  TrainingFootprint f = o.step;
  const int workers = data.tokens ? 0 : data.workers;
  f.prefetched_batches = static_cast<int64_t>(workers) * data.prefetch;
  // the loader works in micro-batch pieces of the global batch (open_run_data): its window holds
  // micro-batches; text and tokens hold no window (no workers)
  f.prefetches_micro_batches = !data.text_documents() && !data.tokens;
  if (!data.eval_split().empty() && !eval_searched) {
    const bool given = o.eval_batch && !o.eval_batch->is_auto();
    f.eval_batch = given ? o.eval_batch->given_or_zero() : 0;
    f.eval_batch_per_micro = given ? 0 : 4;
  }
  if (!data.eval_split().empty()) f.eval_prefetched_batches = static_cast<int64_t>(workers) * data.prefetch;
  return f;
}

/// The samples an evaluation pass reads: no evaluation batch is larger (0: unknown).
/// The longest document of `docs` (bytes, the next-token target included); 0 when empty.
int64_t longest_document(const TextDocs& docs) {
  return docs.lengths.empty() ? 0 : *std::max_element(docs.lengths.begin(), docs.lengths.end());
}

/// Within its scope the workload's synthetic batches are `tokens` long: text:FILE's trials are
/// sized for its longest documents (every batch is padded to its own longest), not for the
/// model's full seq_len, which the documents may never reach. tokens 0: no change.
class SampleTokens {
 public:
  SampleTokens(Workload& workload, int64_t tokens) : workload_(workload), saved_(workload.built().sample_shape) {
    if (tokens > 0) workload_.set_sample_shape({tokens});
  }
  ~SampleTokens() { workload_.set_sample_shape(saved_); }
  SampleTokens(const SampleTokens&) = delete;
  SampleTokens& operator=(const SampleTokens&) = delete;

 private:
  Workload& workload_;
  std::vector<int64_t> saved_;
};

/// The tokens per sample the batch searches measure at: the longest training document's inputs
/// (its length - 1) for text:FILE, else 0 (the workload's own shape).
int64_t searched_tokens(const TrainSessionData& data, int64_t seq_len) {
  if (!data.text_documents()) return 0;
  return std::min(seq_len, std::max<int64_t>(1, longest_document(data.text.train) - 1));
}

int64_t eval_data_size(const TrainSessionData& data, int64_t seq_len) {
  if (data.text_documents()) return static_cast<int64_t>(data.text.val.size());
  if (data.tokens) return data.corpus.val.defined() ? std::max<int64_t>(1, data.corpus.val.numel() / std::max<int64_t>(1, seq_len)) : 0;
  return data.held_out ? data.held_out->size() : 0;
}

/// The search of a batch on the ranks, synced (every rank the same trials). With unequal shares
/// each rank then uses its own largest batch (found exactly on each by a local search above the
/// common one, no collective inside it); with equal shares every rank the smallest rank's.
std::function<SearchResult(TrialRunner&, const SearchOptions&)> search_on_ranks(TrainRanks& ranks) {
  const bool own_max = ranks.group() && (ranks.shares_by_speed() || !ranks.shares().empty());
  return [&ranks, own_max](TrialRunner& runner, const SearchOptions& so) {
    DistSearchResult d = search_across_ranks(runner, so, ranks.group(), /*exact_ranks=*/own_max);
    const auto mine = static_cast<size_t>(ranks.rank());
    if (own_max && mine < d.ranks.size() && d.ranks[mine].max_batch > 0) {
      d.result.max_batch = d.ranks[mine].max_batch;
      d.result.max_batch_exact = d.ranks[mine].exact;
    }
    return d.result;
  };
}

/// eval_batch auto: the evaluation's own batch beside training's state at the chosen split.
AutoEvalBatch search_eval_batch(Workload& workload, MemoryMeter& meter, const TrainingFootprint& footprint,
                                const BatchPlan& plan, const TrainSessionData& data, const TrainSessionOptions& o,
                                TrainRanks& ranks, const TrainEvents& events) {
  AutoEvalBatchOptions ao;
  ao.footprint = footprint;
  ao.micro_batch = plan.micro_batch;
  ao.rank_batch = plan.rank_batch;
  ao.max_eval_batch = eval_data_size(data, workload.built().spec.seq_len);
  ao.search.target_fraction = target_fraction_of(o, meter);
  ao.search.on_trial = events.on_trial;
  ao.run_search = search_on_ranks(ranks);
  // one sample length for the trial: training's global batch and the evaluation's batches alike,
  // the longer of the two data's longest documents
  const int64_t seq_len = workload.built().spec.seq_len;
  const int64_t tokens = data.text_documents()
                             ? std::max(searched_tokens(data, seq_len),
                                        std::min(seq_len, longest_document(data.text.val) - 1))
                             : 0;
  SampleTokens at(workload, tokens);
  AutoEvalBatch chosen = choose_eval_batch(workload, meter, ao);
  if (tokens > 0)
    chosen.reason += fmt::format(", at the longest document ({} tokens; seq_len {})", tokens, seq_len);
  if (events.on_auto_eval_batch) events.on_auto_eval_batch(chosen);
  return chosen;
}

/// What the batch set-up decided: the request to plan from, the objective's outcome, the
/// adaptive batch and the learning rate's gain.
struct BatchChoice {
  BatchRequest request;
  ObjectiveOutcome objective;
  std::unique_ptr<AdaptiveBatch> adaptive;
  double lr_gain = 1;
};

/// The samples of one rank's share of an epoch (0: not known): no batch from the data is larger.
int64_t train_data_size(const TrainSessionData& data, int64_t seq_len, int world_size) {
  int64_t n = 0;
  if (data.text_documents()) n = static_cast<int64_t>(data.text.train.size());
  else if (data.tokens) n = data.corpus.train.defined() ? data.corpus.train.numel() / std::max<int64_t>(1, seq_len) : 0;
  else if (data.train) n = data.train->size();
  return n > 0 ? std::max<int64_t>(1, n / std::max(1, world_size)) : 0;
}

/// micro_batch 0: the largest micro-batch that trains (every rank probes the same batch, an OOM
/// on any is one for all), at most what one rank's share of the data holds (`data_samples`).
AutoBatch search_micro_batch(Workload& workload, MemoryMeter& meter, const TrainingFootprint& footprint,
                           const BatchRequest& request, const TrainSessionOptions& o, TrainRanks& ranks,
                           const TrainEvents& events, int64_t tokens, int64_t data_samples) {
  AutoBatchOptions ao;
  ao.footprint = footprint;
  ao.request = request;
  ao.search.max_batch = data_samples;  // a larger batch never comes from the data
  ao.search.target_fraction = target_fraction_of(o, meter);
  ao.search.on_trial = events.on_trial;
  ao.run_search = search_on_ranks(ranks);
  SampleTokens at(workload, tokens);
  AutoBatch chosen = choose_micro_batch(workload, meter, ao);
  if (tokens > 0)
    chosen.reason += fmt::format(", at the longest document ({} tokens; seq_len {})", tokens,
                                 workload.built().spec.seq_len);
  if (events.on_auto_batch) events.on_auto_batch(chosen);
  return chosen;
}

/// `workers` auto: the loader's threads timed at the micro-batch that trains, on the training data,
/// with the training step (data_feed.h tune_workers); trials take optimizer steps (the caller
/// restores the weights). Each rank tunes its own loader: no collective, an OOM is a result.
WorkerTuning tune_training_workers(Workload& workload, MemoryMeter& meter, const TrainingFootprint& footprint,
                                   const TrainSessionData& data, uint64_t seed, int64_t micro_batch,
                                   const TrainEvents& events) {
  Probe probe(workload, meter);
  TrainingFootprint f = footprint;
  f.global_batch.reset();  // each trial's batch is its own global batch
  probe.set_footprint(f);
  LoaderOptions lo = loader_options(workload, data, seed, meter.device());
  lo.workers = 1;
  DataFeed feed(data.train, lo, meter.device());
  probe.set_batch_source(&feed);
  probe.add_observer(&feed);
  WorkerTuningOptions o;
  o.on_point = events.on_workers_point;
  WorkerTuning chosen = tune_workers(probe, feed, micro_batch, o);
  if (events.on_workers_chosen) events.on_workers_chosen(chosen);
  return chosen;
}

/// `adaptive` with unequal shares: each rank's curve (its ok points), largest micro-batch and
/// share, gathered on every rank (two collectives), so that every rank decides on all of them.
std::vector<AdaptiveRank> every_ranks_pace(const ThroughputCurve& mine, int64_t max_micro_batch,
                                           const std::vector<int64_t>& shares, DistGroup& group) {
  std::vector<int64_t> points;
  for (const ThroughputPoint& p : mine.points)
    if (p.ok && p.samples_per_s > 0) points.insert(points.end(), {p.batch, std::llround(p.samples_per_s * 1e3)});
  const auto longest = static_cast<size_t>(group.all_reduce_max({static_cast<int64_t>(points.size())})[0]);
  std::vector<int64_t> mine_padded = {max_micro_batch};
  mine_padded.insert(mine_padded.end(), points.begin(), points.end());
  mine_padded.resize(1 + longest, 0);  // a batch of 0 pads
  const std::vector<int64_t> all = group.all_gather(mine_padded);
  std::vector<AdaptiveRank> out(static_cast<size_t>(group.world_size()));
  for (size_t r = 0; r < out.size(); ++r) {
    const int64_t* row = &all[r * (1 + longest)];
    out[r].unit = shares.at(r);
    out[r].max_micro_batch = row[0];
    for (size_t i = 1; i + 1 <= longest; i += 2)
      if (row[i] > 0) {
        ThroughputPoint p;
        p.batch = row[i];
        p.samples_per_s = static_cast<double>(row[i + 1]) / 1e3;
        p.ok = true;
        out[r].curve.points.push_back(p);
      }
  }
  return out;  // this rank's too as gathered: every rank decides on the same rounded numbers
}

/// The throughput or goodput objective's pick: the curve up to the micro-batch that trains, timed
/// with the same step (several ranks: the job's curve, each step with the gradients' all-reduce);
/// goodput's noise scale on this data at the base batch, at the initial weights.
void choose_by_curve(Workload& workload, Probe& probe, const c10::Device& device, const TrainingFootprint& footprint,
                     const TrainSessionData& data, const TrainSessionOptions& o, TrainRanks& ranks,
                     const TrainEvents& events, ModelSnapshot& initial, BatchChoice& choice) {
  const int64_t micro = choice.request.micro_batch.value();
  const int world = ranks.world_size();
  if (world > 1 && o.objective.objective == Objective::kGoodput)
    throw UsageError("objective", "goodput across ranks: use `adaptive`, which chooses the global batch by goodput "
                                  "on every rank and counts the gradients' all-reduce, or `objective` throughput");
  ObjectiveOptions oo = o.objective;
  oo.base_batch = base_batch_of(o);
  const NoiseBatches source = noise_batches(data, workload, o.seed, device);
  // several ranks: the job's curve, the slowest rank's steps each with the gradients' all-reduce
  // predicted from the network measured between the ranks
  ObjectiveRanks across;
  const bool own_split = world > 1 && !choice.request.shares.empty();
  int64_t top = micro;
  if (own_split) {
    // unequal shares: each rank its own micro-batch, its part of every global batch fixed; the
    // all-reduce (once a step however a rank splits its part) does not move a rank's best
    // micro-batch, so each rank's own curve (no collective in its steps) picks it: its knee,
    // at most its share
    top = std::min(micro, rank_share(choice.request));
  } else if (world > 1) {
    const double allreduce_ms = ranks.step_allreduce_ms(workload, footprint.fast_paths.compress_bf16);
    across = objective_ranks(*ranks.group(), oo, micro, allreduce_ms, ranks.network_text());
  }
  choice.objective = pick_by_objective(probe, oo, top, source.next, source.name,
                                       events.objective ? events.objective(source.name) : ObjectiveProgress{}, &initial,
                                       across);
  if (own_split)
    choice.objective.reason += fmt::format("; rank {}'s own curve up to its share {} (unequal shares: each rank "
                                           "trains at its own knee)",
                                           ranks.rank(), rank_share(choice.request));
  choice.request.micro_batch = choice.objective.batch;
  if (choice.objective.goodput) {  // goodput chose (not when its noise scale was not measurable)
    choice.request.accumulation = 1;
    if (!o.lr_scaling) choice.lr_gain = choice.objective.goodput->lr_gain;
  }
  if (events.on_objective) events.on_objective(choice.objective);
}

/// The adaptive batch's start: the throughput curve up to the micro-batch that trains (every rank's
/// own with unequal shares), the unit the global batch grows by, and the all-reduce a step costs.
void start_adaptive(Workload& workload, Probe& probe, const TrainingFootprint& footprint, const TrainSessionOptions& o,
                    TrainRanks& ranks, const TrainEvents& events, BatchChoice& choice) {
  const int64_t micro = choice.request.micro_batch.value();
  const int64_t base_batch = base_batch_of(o);
  const int world = ranks.world_size();
  // unequal shares: they split the base batch (a unit), each rank its own part of every unit
  const bool unequal = !choice.request.shares.empty();
  const int64_t shares_sum = global_batch_of(choice.request).value_or(0);
  if (unequal && shares_sum != base_batch)
    throw UsageError("shares", fmt::format("they add up to {}, not the base batch {}: with `adaptive` the shares split "
                                           "the base batch (the global batch grows by whole base batches); give "
                                           "`base_batch` {}, or shares that add up to {}",
                                           shares_sum, base_batch, shares_sum, base_batch));
  if (!unequal && base_batch % world != 0)
    throw UsageError("base_batch", fmt::format("{} is not shared equally by {} ranks; give a multiple of {}",
                                               base_batch, world, world));
  ThroughputCurveOptions co;
  co.max_batch = micro;
  if (events.on_adaptive_curve) events.on_adaptive_curve(micro);
  ThroughputCurve curve = measure_throughput_curve(probe, co);
  AdaptiveBatchOptions ad;
  if (unequal) {  // every rank's own curve, share and largest micro-batch, on every rank
    ad.ranks = every_ranks_pace(curve, micro, choice.request.shares, *ranks.group());
    ad.rank = ranks.rank();
  } else {
    curve = curve_across_ranks(std::move(curve), co, ranks.group());
  }
  ad.unit = unequal ? rank_share(choice.request) : base_batch / world;
  ad.world_size = world;
  ad.max_units = o.adaptive_max;
  ad.max_micro_batch = micro;
  ad.every = o.adapt_every;
  ad.lr_rule = lr_rule_for(workload);
  ad.curve = std::move(curve);
  // on several ranks every step also all-reduces the gradients: a slow network favours a larger
  // batch per all-reduce
  ad.step_comm_ms = ranks.step_allreduce_ms(workload, footprint.fast_paths.compress_bf16);
  choice.adaptive = std::make_unique<AdaptiveBatch>(std::move(ad));
  choice.request.micro_batch = choice.adaptive->micro_batch();
  choice.request.global_batch = base_batch;
  if (events.on_adaptive_start) events.on_adaptive_start(base_batch, choice.adaptive->micro_batch());
}

/// The throughput curve up to the micro-batch that trains, timed with the same step; goodput's
/// noise scale on this data at the base batch, at the initial weights; or the adaptive batch's start.
void choose_by_objective(Workload& workload, MemoryMeter& meter, const TrainingFootprint& footprint,
                         const TrainSessionData& data, const TrainSessionOptions& o, TrainRanks& ranks,
                         const TrainEvents& events, ModelSnapshot& initial, BatchChoice& choice) {
  Probe probe(workload, meter);
  TrainingFootprint f = footprint;
  f.global_batch.reset();  // each trial's batch is its own global batch
  probe.set_footprint(f);
  if (o.objective.objective != Objective::kMemory)
    choose_by_curve(workload, probe, meter.device(), footprint, data, o, ranks, events, initial, choice);
  else
    start_adaptive(workload, probe, footprint, o, ranks, events, choice);
}

/// `shares` auto: each rank times its own step at its micro-batch (no collective inside it, so an
/// OOM cannot hang a peer), the ranks gather the speeds, and `global_batch` is split in proportion
/// (data/batch_plan.h shares_by_speed): a rank twice as fast takes twice the samples, and no rank
/// waits for another at the all-reduce. The trials take optimizer steps: the caller restores the
/// weights.
void choose_shares_by_speed(Workload& workload, MemoryMeter& meter, const TrainingFootprint& footprint,
                            int64_t micro_batch, int64_t global_batch, TrainRanks& ranks) {
  Probe probe(workload, meter);
  TrainingFootprint f = footprint;
  f.global_batch.reset();  // each trial's batch is its own global batch
  probe.set_footprint(f);
  TrialRequest request;
  request.warmup_steps = 1;
  request.measure_steps = 3;
  const Trial t = probe.run(std::min(micro_batch, global_batch), request);
  const double mine = t.ok() ? t.samples_per_s : 0.0;
  std::vector<double> speeds{mine};
  if (ranks.group()) {
    speeds.clear();
    for (int64_t v : ranks.group()->all_gather({static_cast<int64_t>(std::llround(mine * 1e3))}))
      speeds.push_back(static_cast<double>(v) / 1e3);
  }
  for (size_t r = 0; r < speeds.size(); ++r)
    if (!(speeds[r] > 0))
      throw RuntimeFailure(fmt::format("shares auto: rank {} could not time its step at micro-batch {} ({}); give "
                                       "`shares` by hand",
                                       r, std::min(micro_batch, global_batch),
                                       static_cast<int>(r) == ranks.rank() ? t.error : std::string("on that rank")));
  ranks.set_shares(shares_by_speed(global_batch, speeds), speeds);
}

/// Unequal shares (`shares`) need data the sampler splits by sample.
void check_shares_supported(const TrainSessionOptions& o, const TrainSessionData& data, bool by_speed) {
  if (o.objective.objective != Objective::kMemory && by_speed && !o.adaptive)
    throw UsageError("shares", "auto splits the global batch by each rank's speed at its micro-batch, and an "
                               "`objective` other than memory chooses the micro-batch afterwards; give the shares "
                               "(e.g. 48,16: each rank then trains at its own knee), or `objective` memory");
  if (data.text_documents() && o.max_tokens)
    throw UsageError("shares", "unequal shares split a global batch of documents, and `max_tokens` makes batches of "
                               "a token budget instead; give `max_tokens` 0 (fixed batches), or leave `shares` out");
}

/// The trainer's data and evaluation: tokens (each rank its share of the stream) or the loader.
struct RunData {
  std::unique_ptr<TrainData> train;
  std::unique_ptr<EvalData> eval;
};
RunData open_run_data(const TrainSessionData& data, const Workload& workload, const LoaderOptions& lo,
                      int64_t eval_batch, uint64_t seed, const TrainRanks& ranks, int64_t max_tokens,
                      int64_t max_documents) {
  RunData d;
  // every rank's samples of a step together: equal shares, or the shares' sum
  int64_t global = lo.batch_size * ranks.world_size();
  if (!ranks.shares().empty()) global = std::accumulate(ranks.shares().begin(), ranks.shares().end(), int64_t{0});
  if (data.text_documents()) {
    d.train = std::make_unique<TextTrainData>(data.text, max_tokens > 0 ? max_documents : global, seed, ranks.rank(),
                                              ranks.world_size(), max_tokens, ranks.shares());
    if (data.text.val.size() > 0) d.eval = std::make_unique<TextEvalData>(data.text.val, eval_batch);
    return d;
  }
  if (data.tokens) {
    d.train = std::make_unique<TokenTrainData>(data.corpus, workload.built().spec.seq_len, workload.built().classes,
                                               global, seed, ranks.rank(), ranks.world_size(), kSyntheticTokenSamples,
                                               ranks.shares());
    if (data.corpus.val.defined())
      d.eval = std::make_unique<TokenEvalData>(data.corpus.val, workload.built().spec.seq_len, eval_batch);
    return d;
  }
  d.train = std::make_unique<LoaderTrainData>(data.train, lo);
  if (data.held_out) {  // every rank evaluates the whole held-out split (none waits for rank 0)
    LoaderOptions eo = lo;
    eo.parts = 1;
    eo.shard = ShardOptions{};
    eo.batch_size = eval_batch;
    d.eval = std::make_unique<LoaderEvalData>(data.held_out, eo);
  }
  return d;
}

/// The progress events around the trainer's callbacks; the leak watch after every step.
/// The trainer's options from the session's and the batch plan (the events, monitor, data and
/// learning rate are wired afterwards).
TrainOptions trainer_options(const TrainSessionOptions& options, const BatchPlan& plan, const TrainRanks& ranks,
                             const std::vector<RunSetting>& settings) {
  TrainOptions t;
  t.stop = options.stop;
  t.step_config() = options.step.step_config();
  t.loss_every = options.loss_every;
  t.count_flops = true;
  t.micro_batch = plan.micro_batch;
  t.accumulation = plan.accumulation;
  if (!ranks.shares().empty()) {
    t.global_batch = plan.global_batch;
    t.shares = ranks.shares();
  }
  t.epochs = options.epochs;
  t.max_steps = options.max_steps;
  t.oom_backoff = options.oom_backoff;
  t.checkpoint_dir = options.checkpoint_dir;
  t.checkpoint_every = options.checkpoint_every;
  t.resume = options.resume;
  t.resume_settings = resume_checked_settings(settings);
  return t;
}

/// Unequal shares (auto, or given with `reshare_every`): the trainer re-splits while training by the speeds the ranks show (their busy
/// times, TrainRanks::rebalance_shares); `most` is this rank's largest micro-batch.
void wire_reshare(TrainOptions& t, TrainRanks& ranks, int64_t most, const TrainEvents& events) {
  t.reshare = [&ranks, most](int64_t step, double step_ms) -> std::optional<Reshare> {
    std::optional<std::vector<int64_t>> shares = ranks.rebalance_shares(step, step_ms);
    if (!shares) return std::nullopt;
    const int64_t mine = shares->at(static_cast<size_t>(ranks.rank()));
    return Reshare{std::move(*shares), mine, most};
  };
  if (events.on_reshare)
    t.on_reshare = [&ranks, on_reshare = events.on_reshare](int64_t micro, int64_t accumulation) {
      on_reshare(ranks.share_changes().back(), micro, accumulation);
    };
}

void wire_events(TrainOptions& t, const TrainEvents& events, int64_t total, TrainMonitor* monitor,
                 std::shared_ptr<GradientNoiseScale> noise, AdaptiveBatch* adaptive, LeakWatch& leak_watch) {
  auto eta = std::make_shared<EtaEstimator>();
  t.on_step = [=, &leak_watch, on_step = events.on_step, on_warning = events.on_warning](int64_t step, double loss,
                                                                                         double lr) {
    if (on_step) {
      eta->observe(step + 1, EtaEstimator::Clock::now());
      TrainProgress p;
      p.step = step + 1;
      p.total_steps = total;
      p.loss = loss;
      p.lr = lr;
      p.steps_per_s = eta->steps_per_s();
      if (p.steps_per_s) p.seconds_left = eta->seconds_left(total);
      p.noise_measured = noise != nullptr;
      if (noise) p.noise_scale = noise->noise_scale();
      if (monitor) p.monitor_status = monitor->status_text();
      on_step(p);
    }
    // memory after every step must stay flat once warm (seed M2): warn once if it grows
    const std::string warning = leak_watch.after_step(step);
    if (!warning.empty() && on_warning) on_warning(warning);
  };
  t.on_eval = events.on_eval;
  if (events.on_adapt)
    t.on_adapt = [adaptive, on_adapt = events.on_adapt](const AdaptiveChange& c) {
      on_adapt(c, adaptive->micro_batch(), adaptive->lr_gain());
    };
  t.on_backoff = events.on_backoff;
  t.on_eval_backoff = events.on_eval_backoff;
}

}  // namespace

void TrainSessionOptions::check() const {
  const int64_t micro = micro_batch.given_or_zero();
  if (!micro_batch.is_auto() && (micro < 1 || micro > kMaxBatch))
    throw UsageError("micro_batch", fmt::format("{} is not a micro-batch in 1..{} or auto", micro, kMaxBatch));
  check_option_range("loss_every", static_cast<double>(loss_every));  // the documented ranges (core/option_doc.h)
  objective.check();
  const bool auto_batch = micro_batch.is_auto();
  const std::string objective_name = to_string(objective.objective);
  if (objective.objective != Objective::kMemory && !auto_batch)
    throw UsageError(fmt::format("`objective` {} chooses the micro-batch: give `micro_batch` auto", objective_name));
  if (chooses_global_batch(*this) && (accumulation || global_batch))
    throw UsageError(fmt::format("{} chooses the global batch: drop `accumulation` and `global_batch` "
                                 "(`base_batch` is the batch the learning rate was tuned for)",
                                 adaptive ? "`adaptive`" : "`objective` goodput"));
  if (adaptive && objective.objective != Objective::kMemory)
    throw UsageError(fmt::format("`adaptive` with `objective` {}: `adaptive` starts at `base_batch` and re-chooses "
                                 "the batch by goodput itself; drop `objective`",
                                 objective_name));
  check_option_range("adapt_every", static_cast<double>(adapt_every));
  check_option_range("adaptive_max", static_cast<double>(adaptive_max));
  if (eval_batch && !eval_batch->is_auto() && (eval_batch->given_or_zero() < 1 || eval_batch->given_or_zero() > kMaxBatch))
    throw UsageError("eval_batch", fmt::format("{} is not an evaluation batch in 1..{} or auto",
                                               eval_batch->given_or_zero(), kMaxBatch));
  if (max_tokens && !max_tokens->is_auto() && max_tokens->given_or_zero() < 1)
    throw UsageError("max_tokens", fmt::format("{} is not a count of tokens; give N >= 1 or auto, or leave it out "
                                               "(fixed batches)",
                                               max_tokens->given_or_zero()));
  if (eval_every_samples < 0)
    throw UsageError("eval_every_samples", fmt::format("{} is negative; 0 evaluates at epoch ends only", eval_every_samples));
  check_option_range("stop_at_accuracy", stop_at_accuracy);
  if (base_batch && *base_batch < 1)
    throw UsageError("base_batch", fmt::format("{} is not a positive integer; give the batch the learning rate was "
                                               "tuned for, or leave it out ({})",
                                               *base_batch, kDefaultBaseBatch));
  if (target_fraction && !(*target_fraction > 0 && *target_fraction <= 1))
    throw UsageError("target_fraction", fmt::format("{} is outside (0, 1]; e.g. 0.9 leaves 10 % of the budget free",
                                                    *target_fraction));
  if (epochs < 0 || max_steps < 0 || (epochs == 0 && max_steps == 0))
    throw UsageError(fmt::format("`epochs` {}: give at least one epoch or `max_steps` N", epochs));
  check_option_range("warmup_steps", static_cast<double>(warmup_steps));
  check_option_range("checkpoint_every", static_cast<double>(checkpoint_every));
  check_option_range("clip_grad_norm", step.clip_grad_norm);
  if (resume && checkpoint_dir.empty())
    throw UsageError("resume", "needs the checkpoint directory to resume from (`checkpoint_dir`)");
}

std::string TrainSessionData::eval_split() const {
  if (text_documents()) return text.val.size() > 0 ? "val" : "";
  if (tokens) return corpus.val.defined() ? "val" : "";
  return held_out ? held_out_split : "";
}

std::optional<CountOrAuto> parse_max_tokens(const std::string& text) {
  if (text == "auto") return CountOrAuto::automatic();
  const std::optional<long long> n = parse_whole_number(text);
  if (!n || *n < 0)
    throw UsageError("max_tokens", fmt::format("'{}' is not a count of tokens; give N (padded tokens per batch), "
                                               "auto (the micro-batch x the length it was sized at) or 0 (fixed batches)",
                                               text));
  if (*n == 0) return std::nullopt;
  return CountOrAuto::of(*n);
}

std::optional<CountOrAuto> parse_eval_batch(const std::string& text) {
  if (text == "auto") return CountOrAuto::automatic();
  const std::optional<long long> n = parse_whole_number(text);
  if (!n || *n < 0 || *n > kMaxBatch)
    throw UsageError("eval_batch", fmt::format("'{}' is not an evaluation batch; give N (1..{}) or auto (searched "
                                               "beside training's state)",
                                               text, kMaxBatch));
  if (*n == 0) return std::nullopt;
  return CountOrAuto::of(*n);
}

void parse_batch_options(TrainSessionOptions& options, const std::string& micro_batch, const std::string& max_tokens,
                         const std::string& eval_batch, const DistEnv& env) {
  if (micro_batch.find(',') != std::string::npos) {  // one per rank
    const std::vector<std::string> each = split_list(micro_batch);
    if (static_cast<int>(each.size()) != env.world_size)
      throw UsageError("micro_batch", fmt::format("{} gives {} micro-batches, one a rank, but the run has {} rank(s); "
                                                  "give one for every rank, or one for all",
                                                  micro_batch, each.size(), env.world_size));
    for (const std::string& item : each)
      if (item == "auto")
        throw UsageError("micro_batch", fmt::format("{}: auto searches every rank's own (with `shares`); give auto "
                                                    "alone, or a count for every rank",
                                                    micro_batch));
      else
        (void)parse_micro_batch(item);
    options.micro_batches = micro_batch;
    options.micro_batch = parse_micro_batch(each[static_cast<size_t>(env.rank)]);
  } else {
    options.micro_batch = parse_micro_batch(micro_batch);
  }
  options.max_tokens = parse_max_tokens(max_tokens);
  options.eval_batch = parse_eval_batch(eval_batch);
}

CountOrAuto parse_micro_batch(const std::string& text) {
  if (text == "auto") return CountOrAuto::automatic();
  int64_t micro = 0;
  try {
    size_t used = 0;
    micro = std::stoll(text, &used);
    if (used != text.size()) micro = 0;
  } catch (const std::exception&) {
    micro = 0;
  }
  if (micro <= 0 || micro > kMaxBatch)
    throw UsageError("micro_batch", fmt::format("'{}' is not a micro-batch in 1..{} or auto", text, kMaxBatch));
  return CountOrAuto::of(micro);
}

HeldOut open_held_out(const std::string& data, double val_fraction, bool skip_bad_samples) {
  DatasetOptions eval_options;
  eval_options.split = val_fraction > 0 ? "val" : "test";
  eval_options.val_fraction = val_fraction;
  eval_options.skip_bad_samples = skip_bad_samples;
  HeldOut h;
  h.split = eval_options.split;
  try {
    h.dataset = open_dataset(data, eval_options);
  } catch (const UsageError&) {
    if (val_fraction > 0) throw;  // the val split exists: its errors are errors
    h.note = fmt::format("`data` {}: no test or validation split: no evaluation{}", data,
                         can_hold_out(data) ? " (use `val_fraction` F)" : "");
  }
  return h;
}

void resume_from(TrainSessionOptions& o, const std::string& dir) {
  if (dir.empty()) return;
  if (!o.checkpoint_dir.empty() && dir != o.checkpoint_dir)
    throw UsageError(fmt::format("`resume` {} and `checkpoint_dir` {} differ; a resumed run keeps writing where it "
                                 "resumed from",
                                 dir, o.checkpoint_dir));
  o.checkpoint_dir = dir;
  o.resume = true;
}

/// The session's settings, every check before any work made: every rank runs the same settings.
std::vector<RunSetting> checked_settings(Workload& workload, const TrainSessionOptions& options, TrainSessionData& data,
                                         TrainRanks& ranks) {
  if (options.micro_batch.is_auto() && !ranks.data_parallel_devices().empty())
    throw UsageError("`parallel` dp with `micro_batch` auto: the search probes one GPU, not the replicas together; "
                     "give `micro_batch` N (the whole batch, split over the GPUs)");
  if (!data.tokens && !data.train)
    throw UsageError("data", "training needs a dataset (e.g. fashion-mnist, idx:DIR, cifar10:DIR; tokens:FILE for "
                             "token models)");
  if (data.tokens) data.workers = 0;
  if (data.text_documents()) check_text_vocab(data.text.name, workload.built().classes);
  std::vector<RunSetting> settings = train_run_settings(workload, options, data);
  if (!options.micro_batches.empty() && !ranks.shares_by_speed() && ranks.shares().empty())
    throw UsageError("micro_batch", fmt::format("{}: a micro-batch per rank needs `shares` (each rank's part of every "
                                                "global batch); give `shares`, or one micro-batch for every rank",
                                                options.micro_batches));
  if (ranks.shares_by_speed() || !ranks.shares().empty()) {
    check_shares_supported(options, data, ranks.shares_by_speed());
    settings.push_back(
        {"shares", ranks.shares_by_speed() ? "auto" : fmt::format("{}", fmt::join(ranks.shares(), ",")), true});
  }
  if (ranks.group()) check_ranks_agree(settings, *ranks.group());
  return settings;
}

namespace {
/// What the session decided before training: the batch (searched, split by speed, chosen by the
/// objective), the evaluation's batch and the loader's workers.
struct Prepared {
  BatchChoice choice;
  BatchPlan plan;
  std::optional<AutoBatch> auto_batch;
  std::optional<AutoEvalBatch> auto_eval;
  std::optional<WorkerTuning> workers_tuning;
  int64_t tokens = 0;  // text:FILE: the longest document the searches sized for (0: not text)
};
}  // namespace

BatchRequest batch_request(const TrainSessionOptions& options, const TrainRanks& ranks) {
  BatchRequest request;
  request.micro_batch = options.micro_batch.given();  // nullopt: auto
  request.accumulation = options.accumulation;
  // shares auto: split once the micro-batch is known and timed
  if (!ranks.shares_by_speed()) request.global_batch = options.global_batch;
  request.world_size = ranks.world_size();
  request.shares = ranks.shares();
  request.rank = ranks.rank();
  return request;
}

namespace {

/// The batch the options ask for (shares split by speed left to prepare_batches), checked.
BatchChoice requested_batch(const TrainSessionOptions& options, TrainRanks& ranks, int64_t split_by_speed) {
  if (options.adaptive && ranks.share_balance().every_steps.value_or(0) > 0)
    throw UsageError("reshare_every", "`adaptive` keeps the shares split before training (its batch grows by "
                                      "whole base batches, each split alike); leave `reshare_every` out");
  if (ranks.shares_by_speed() && split_by_speed == 0)
    throw UsageError("shares", "auto splits a global batch by each rank's speed: give `global_batch`");
  BatchChoice choice;
  choice.request = batch_request(options, ranks);
  check_batch_request(choice.request);
  return choice;
}

}  // namespace

/// The searches and timings before training (each asked for): the micro-batch, the shares by
/// speed, the objective's batch, the evaluation's batch, the workers. The trials take optimizer
/// steps on synthetic labels and reseed the generators: the weights and generator states are put
/// back after them.
Prepared prepare_batches(Workload& workload, MemoryMeter& meter, TrainSessionData& data,
                         const TrainSessionOptions& options, TrainRanks& ranks, const TrainEvents& events) {
  Prepared prep;
  // `shares` auto splits the global batch; with `adaptive`, the base batch (its unit)
  const int64_t split_by_speed = options.adaptive ? base_batch_of(options) : options.global_batch.value_or(0);
  prep.choice = requested_batch(options, ranks, split_by_speed);
  BatchChoice& choice = prep.choice;
  // the evaluation's own batch is searched when asked (auto), and by default when the micro-batch is
  // searched; not with a token budget (its batches are not a count of documents)
  const bool eval_searched = !data.eval_split().empty() && !options.max_tokens &&
                             (options.eval_batch ? options.eval_batch->is_auto() : options.micro_batch.is_auto());
  TrainingFootprint footprint = training_footprint(options, data, eval_searched);
  // DDP's reducer keeps a bucket copy of every gradient, made after the search: the trials hold
  // it, and as much again for the bucket the all-reduce has in flight (at an exact max a few
  // hundred KiB more ran rank 1 of 2 out of memory at step 1)
  if (ranks.group()) {
    int64_t gradient_bytes = 0;
    for (const auto& p : workload.model().parameters())
      if (p.requires_grad()) gradient_bytes += static_cast<int64_t>(p.nbytes());
    footprint.held_beside_bytes = gradient_bytes;  // the buckets, always
    footprint.held_in_step_bytes = gradient_bytes;  // a bucket in flight, in the backward only
  }
  // the trials take optimizer steps on synthetic labels and reseed the generators: training
  // starts from the weights and generator states it would have had without them
  std::optional<ModelSnapshot> before_probing;
  const bool tunes_workers = data.workers_auto && data.train && !data.tokens;
  if (options.micro_batch.is_auto() || options.objective.objective != Objective::kMemory || options.adaptive ||
      eval_searched || tunes_workers || ranks.shares_by_speed())
    before_probing.emplace(workload.model(), meter.device());
  // text:FILE: the searches size for the longest document, which every batch is padded to at most
  const int64_t tokens = prep.tokens = searched_tokens(data, workload.built().spec.seq_len);
  std::optional<AutoBatch>& auto_batch = prep.auto_batch;
  if (options.micro_batch.is_auto()) {
    BatchRequest searched = choice.request;
    if (options.adaptive) searched.shares.clear();  // the rank's batch grows by units: no share caps its micro-batch
    auto_batch = search_micro_batch(workload, meter, footprint, searched, options, ranks, events, tokens,
                                    train_data_size(data, workload.built().spec.seq_len, ranks.world_size()));
    choice.request.micro_batch = auto_batch->micro_batch;
  }
  if (ranks.shares_by_speed()) {
    choose_shares_by_speed(workload, meter, footprint, choice.request.micro_batch.value(), split_by_speed, ranks);
    choice.request.global_batch = split_by_speed;
    choice.request.shares = ranks.shares();
  }
  if (options.objective.objective != Objective::kMemory || options.adaptive)
    choose_by_objective(workload, meter, footprint, data, options, ranks, events, *before_probing, choice);
  prep.plan = plan_batches(choice.request, choice.request.micro_batch.value());
  if (eval_searched) prep.auto_eval = search_eval_batch(workload, meter, footprint, prep.plan, data, options, ranks, events);
  if (tunes_workers) {
    prep.workers_tuning = tune_training_workers(workload, meter, footprint, data, options.seed, prep.plan.micro_batch, events);
    data.workers = prep.workers_tuning->workers;
  }
  if (before_probing) before_probing->restore();
  return prep;
}

/// The training's monitor (`monitor`; nullptr without), its windows counting this rank's samples.
std::unique_ptr<TrainMonitor> make_monitor(const TrainSessionOptions& options, int64_t rank_batch,
                                           const TrainEvents& events) {
  if (!options.monitor) return nullptr;
  TrainMonitorOptions mo;
  mo.monitor = *options.monitor;
  mo.monitor.mixed_precision = options.step.precision == Precision::kBf16 || options.step.precision == Precision::kFp16;
  mo.global_batch = rank_batch;
  auto monitor = std::make_unique<TrainMonitor>(mo);
  if (!monitor->nvml_note().empty() && events.on_warning)
    events.on_warning(monitor->nvml_note() + "; utilization falls back to /proc");
  return monitor;
}

/// What training left that the summary reads.
struct Trained {
  const TrainResult& r;
  const TrainOptions& t;
  std::string data_name;
  int64_t eval_batch = 0;  // 0: no evaluation data
  int64_t rank_batch = 0;  // this rank's samples per step
  TrainMonitor* monitor = nullptr;
  std::shared_ptr<GradientNoiseScale> noise;
  LeakWatch& leak_watch;
};

/// The session's summary and JSON, and this rank's row of the ranks' table.
void summarize_session(Workload& workload, MemoryMeter& meter, const RunContext& context, const TrainSessionData& data,
                       const TrainSessionOptions& options, TrainRanks& ranks, const Prepared& prep,
                       const Trained& trained, TrainSessionResult& out) {
  const TrainResult& r = trained.r;
  const TrainOptions& t = trained.t;
  const BatchChoice& choice = prep.choice;
  TrainSummary& s = out.summary;
  s.context = context;
  s.data = trained.data_name;
  s.precision = to_string(options.step.precision);
  s.checkpointing = to_string(options.step.checkpointing);
  s.fast_paths = t.fast_paths.to_string();
  s.loss_every = t.loss_every;
  s.result = r;
  s.eval_split = data.eval_split();
  if (trained.eval_batch > 0) s.eval_batch = trained.eval_batch;
  if (prep.auto_eval) s.eval_search = prep.auto_eval->search;
  if (prep.auto_batch) {
    s.batch_search = prep.auto_batch->search;
    s.batch_search_tokens = prep.tokens;
  }
  s.leak = trained.leak_watch.report();
  s.leak_sites = trained.leak_watch.sites();
  if (trained.monitor) s.monitor = trained.monitor->finish();
  // each rank's row of the ranks' table (its step time from the global samples/s: every rank
  // steps together); with unequal shares and a searched micro-batch, its own largest too
  const double step_ms = r.samples_per_s > 0 ? 1e3 * static_cast<double>(r.global_batch) / r.samples_per_s : 0.0;
  RankTraining mine{ranks.rank(), meter.budget_bytes(), r.micro_batch, r.accumulation,
                    choice.adaptive               ? choice.adaptive->rank_batch()
                    : !ranks.shares().empty() ? ranks.shares().at(static_cast<size_t>(ranks.rank()))  // as re-split
                                              : trained.rank_batch};
  if (prep.auto_batch && !ranks.shares().empty()) {
    mine.max_batch = prep.auto_batch->search.max_batch;
    mine.max_batch_exact = prep.auto_batch->search.max_batch_exact;
  }
  ranks.finish_training(mine, step_ms);
  out.ranks = ranks.summary();
  if (s.monitor && s.monitor->bottleneck) note_straggler(*s.monitor->bottleneck, out.ranks, ranks.rank());
  if (choice.objective.objective != Objective::kMemory) s.objective = choice.objective;
  if (choice.adaptive)
    s.adaptive = adaptive_summary(*choice.adaptive, base_batch_of(options), options.adaptive_max, lr_rule_for(workload));
  if (r.stopped_by_signal)
    s.interrupted = TrainInterruption{signal_name(r.stopped_by_signal), 128 + r.stopped_by_signal, r.steps,
                                      r.checkpoints_failed ? std::string() : t.checkpoint_dir};
  if (const auto& noise = trained.noise)
    s.noise = TrainNoiseSummary{noise->noise_scale(), noise->gradient_sq_norm(), noise->trace_covariance(),
                                noise->measurements()};
  s.compute = train_compute(workload, meter, t, r, ranks.world_size());
  s.workers = data.workers;
  s.workers_auto = prep.workers_tuning;
}

TrainSessionResult run_train_session(Workload& workload, MemoryMeter& meter, const RunContext& context,
                                     TrainSessionData data, const TrainSessionOptions& options, TrainRanks& ranks,
                                     const TrainEvents& events) {
  options.check();
  const int world = ranks.world_size();
  const std::vector<RunSetting> settings = checked_settings(workload, options, data, ranks);
  CheckpointLock checkpoint_lock;
  if (!options.checkpoint_dir.empty() && ranks.writer() &&
      (!options.resume || std::filesystem::is_directory(options.checkpoint_dir))) {  // else: no checkpoint there
    check_checkpoint_dir(options.checkpoint_dir, options.resume ? "resume" : "checkpoint_dir");
    checkpoint_lock = CheckpointLock(options.checkpoint_dir);
  }
  Prepared prep = prepare_batches(workload, meter, data, options, ranks, events);
  BatchChoice& choice = prep.choice;
  const BatchPlan& plan = prep.plan;
  const std::optional<AutoEvalBatch>& auto_eval = prep.auto_eval;
  const int64_t tokens = prep.tokens;
  const int64_t rank_batch = plan.rank_batch;  // this rank's samples per step

  TrainOptions t = trainer_options(options, plan, ranks, settings);
  LoaderOptions lo = loader_options(workload, data, options.seed, meter.device());
  lo.batch_size = rank_batch;
  lo.parts = plan.accumulation;  // the loader's window holds micro-batches (training_footprint)
  ranks.setup(workload, lo, t);  // shard, DDP, rank-0 checkpoints; dp replicas
  const int64_t eval_batch = auto_eval ? auto_eval->eval_batch
                             : options.eval_batch && !options.eval_batch->is_auto() ? options.eval_batch->given_or_zero()
                                                                                    : 4 * plan.micro_batch;
  // text with a token budget: each step one batch of similar lengths, run whole (the budget is what
  // the step was sized for: the micro-batch x the longest document when it was searched, else x
  // seq_len), at most global_batch documents when given
  const int64_t sized_length = options.micro_batch.is_auto() && tokens > 0 ? tokens + 1 : workload.built().spec.seq_len;
  const int64_t max_tokens = !options.max_tokens              ? 0
                             : options.max_tokens->is_auto() ? plan.micro_batch * sized_length
                                                             : options.max_tokens->given_or_zero();
  if (max_tokens > 0) {
    if (!data.text_documents())
      throw UsageError("max_tokens", fmt::format("{}: token budgets batch the documents of `data` text:FILE; give "
                                                 "text:FILE, or leave `max_tokens` out",
                                                 options.max_tokens->to_string()));
    t.micro_batch = max_tokens;  // a batch of short documents runs whole: never split
    t.accumulation = 1;
  }
  RunData run_data = open_run_data(data, workload, lo, eval_batch, options.seed, ranks, max_tokens,
                                     options.global_batch.value_or(0));
  const std::string data_name = run_data.train->name();
  const LrScaling scaling = options.lr_scaling.value_or(LrScaling::kNone);
  t.schedule.peak_lr = scale_learning_rate(workload.learning_rate(), plan.global_batch, options.base_batch.value_or(0), scaling) *
                       choice.lr_gain;
  t.schedule.warmup_steps = options.warmup_steps;
  t.schedule.decay = options.lr_decay;
  const int64_t per_epoch = run_data.train->steps_per_epoch();
  t.schedule.total_steps = options.max_steps > 0 ? options.max_steps : options.epochs * per_epoch;
  t.schedule.step_every = per_epoch;
  const int64_t total = t.schedule.total_steps;
  std::unique_ptr<TrainMonitor> monitor = make_monitor(options, rank_batch, events);
  t.observer = monitor.get();
  const auto noise = options.noise_scale || choice.adaptive ? std::make_shared<GradientNoiseScale>() : nullptr;
  t.noise = noise.get();
  t.adaptive = choice.adaptive.get();
  t.eval_every_samples = options.eval_every_samples;
  t.stop_at_accuracy = options.stop_at_accuracy;
  if (events.on_start)
    events.on_start(TrainStart{data_name, plan.micro_batch, plan.accumulation, world, plan.global_batch,
                               plan.rank_batch, total, per_epoch, t.schedule.peak_lr});
  LeakWatch leak_watch(meter);
  wire_events(t, events, total, monitor.get(), noise, choice.adaptive.get(), leak_watch);
  if (ranks.resplits() > 0 && !choice.adaptive && max_tokens == 0)
    wire_reshare(t, ranks, choice.request.micro_batch.value(), events);

  Trainer trainer(workload, meter, *run_data.train, run_data.eval.get(), t);
  OpProfile op_profile;
  if (options.profile_ops) op_profile.start();
  const TrainResult r = trainer.run();
  TrainSessionResult out;
  if (op_profile.running()) out.op_profile = op_profile.stop();
  const Trained trained{r, t, data_name, run_data.eval ? eval_batch : 0, rank_batch, monitor.get(), noise, leak_watch};
  summarize_session(workload, meter, context, data, options, ranks, prep, trained, out);
  return out;
}

TrainLinesStyle train_lines_style(const TrainSessionOptions& o, const RunContext& context, int64_t log_every) {
  TrainLinesStyle s;
  s.model_name = context.model_name;
  s.device_info = context.device_info;
  s.log_every = log_every;
  s.objective = o.objective.objective;
  s.precision = o.step.precision;
  s.checkpointing = o.step.checkpointing;
  s.base_batch = base_batch_of(o);
  s.adaptive_max = o.adaptive_max;
  s.adapt_every = o.adapt_every;
  return s;
}

nlohmann::json TrainSessionResult::to_json() const {
  nlohmann::json j = summary.to_json();
  ranks.add_to_json(j);
  return j;
}

nlohmann::json TrainSessionResult::op_profile_json() const {
  return op_profile ? op_table_json(*op_profile, summary.result.steps) : nlohmann::json();
}

std::string TrainSessionResult::to_text() const { return train_summary_text(summary, ranks); }

}  // namespace saturate

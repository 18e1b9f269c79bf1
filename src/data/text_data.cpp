#include "saturate/data/text_data.h"

#include <algorithm>

#include <cstring>

#include <fmt/format.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"
#include "saturate/data/sampler.h"
#include "saturate/data/token_budget.h"
#include "saturate/data/token_data.h"

namespace saturate {
namespace {

/// Documents [first, last) of `all` as their own TextDocs (bytes copied, offsets from 0).
TextDocs slice_docs(const std::vector<uint8_t>& bytes, const std::vector<int64_t>& offsets,
                    const std::vector<int64_t>& lengths, int64_t first, int64_t last) {
  TextDocs d;
  int64_t total = 0;
  for (int64_t i = first; i < last; ++i) total += lengths[static_cast<size_t>(i)];
  d.bytes = torch::empty({total}, torch::kUInt8);
  uint8_t* out = d.bytes.data_ptr<uint8_t>();
  int64_t at = 0;
  for (int64_t i = first; i < last; ++i) {
    const int64_t len = lengths[static_cast<size_t>(i)];
    std::copy_n(bytes.data() + offsets[static_cast<size_t>(i)], len, out + at);
    d.offsets.push_back(at);
    d.lengths.push_back(len);
    at += len;
  }
  return d;
}

}  // namespace

bool is_text_data(const std::string& data) { return data.rfind("text:", 0) == 0; }

namespace {
/// What each document costs beside its bytes: its offset and length while read (16), again in
/// its split (16), and the worst-case order's lengths and indices (16).
constexpr int64_t kTableBytesPerDocument = 48;
}  // namespace

TextCorpus read_text_corpus(const std::string& path, double val_fraction, int64_t seq_len) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw UsageError("val_fraction", fmt::format("{} is outside [0, 1); e.g. 0.1 holds out the last 10 % of the "
                                                 "documents",
                                                 val_fraction));
  if (seq_len < 1) throw UsageError("seq_len", fmt::format("{} is not a positive number of tokens", seq_len));
  const std::vector<uint8_t> bytes = read_corpus_file("text", path);
  TextCorpus c;
  c.name = "text:" + path;
  std::vector<int64_t> offsets, lengths;
  const int64_t n = static_cast<int64_t>(bytes.size());
  // the documents' tables are bounded by the budget too, not only the bytes (issue 43: 126 MB of
  // "ab\n", 42 M documents, peaked at 2.08 GB under a 256 MiB budget): counted before they are made
  int64_t documents = 0;
  for (int64_t start = 0; start < n;) {
    const void* nl = std::memchr(bytes.data() + start, '\n', static_cast<size_t>(n - start));
    const int64_t end = nl ? static_cast<const uint8_t*>(nl) - bytes.data() : n;
    documents += end - start >= 2;
    start = end + 1;
  }
  const int64_t budget = cpu_memory_counters().budget_bytes;
  if (budget > 0 && 2 * n + kTableBytesPerDocument * documents > budget)
    throw UsageError(fmt::format("`data` text:{}: {} documents take {} for their tables ({} bytes each: offsets, "
                                 "lengths, the splits and the worst-case order) beside {} for the text, more than "
                                 "the `memory_budget` {}; give fewer, longer documents or a larger budget",
                                 path, documents, format_bytes(kTableBytesPerDocument * documents),
                                 kTableBytesPerDocument, format_bytes(2 * n), format_bytes(budget)));
  offsets.reserve(static_cast<size_t>(documents));
  lengths.reserve(static_cast<size_t>(documents));
  for (int64_t start = 0; start < n;) {
    int64_t end = start;
    while (end < n && bytes[static_cast<size_t>(end)] != '\n') ++end;
    int64_t len = end - start;
    if (len > 0 && bytes[static_cast<size_t>(end - 1)] == '\r') --len;  // CRLF files
    if (len < 2) {
      if (len > 0) ++c.dropped;
    } else {
      if (len > seq_len + 1) {
        len = seq_len + 1;
        ++c.truncated;
      }
      offsets.push_back(start);
      lengths.push_back(len);
    }
    start = end + 1;
  }
  const int64_t docs = static_cast<int64_t>(lengths.size());
  const int64_t val = static_cast<int64_t>(static_cast<double>(docs) * val_fraction);
  if (docs - val < 1)
    throw UsageError(fmt::format("`data` text:{}: {} document(s) of 2 bytes or more ({} held out): nothing to train "
                                 "on; give a file with one document per line",
                                 path, docs, val));
  c.train = slice_docs(bytes, offsets, lengths, 0, docs - val);
  if (val > 0) c.val = slice_docs(bytes, offsets, lengths, docs - val, docs);
  return c;
}

Batch text_batch(const TextDocs& docs, const std::vector<int64_t>& items) {
  int64_t longest = 2;
  for (const int64_t i : items) longest = std::max(longest, docs.lengths.at(static_cast<size_t>(i)));
  const int64_t rows = static_cast<int64_t>(items.size());
  torch::Tensor inputs = torch::zeros({rows, longest - 1}, torch::kLong);
  torch::Tensor targets = torch::full({rows, longest - 1}, -100, torch::kLong);
  auto in = inputs.accessor<int64_t, 2>();
  auto tg = targets.accessor<int64_t, 2>();
  const uint8_t* bytes = docs.bytes.data_ptr<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const size_t i = static_cast<size_t>(items[static_cast<size_t>(r)]);
    const uint8_t* doc = bytes + docs.offsets[i];
    for (int64_t t = 0; t + 1 < docs.lengths[i]; ++t) {
      in[r][t] = doc[t];
      tg[r][t] = doc[t + 1];
    }
  }
  return {inputs, targets};
}

TextTrainData::TextTrainData(const TextCorpus& corpus, int64_t global_batch, uint64_t seed, int rank, int world_size,
                             int64_t max_tokens, const std::vector<int64_t>& shares)
    : docs_(corpus.train), global_batch_(global_batch), max_tokens_(max_tokens), seed_(seed), rank_(rank),
      world_size_(world_size), name_(corpus.name) {
  if (max_tokens_ == 0 && (global_batch_ <= 0 || (shares.empty() && global_batch_ % world_size_ != 0)))
    throw UsageError("global_batch", fmt::format("{} does not split over {} rank(s)", global_batch_, world_size_));
  if (max_tokens_ == 0) slice_ = rank_slice(global_batch_, rank_, world_size_, shares);
  if (max_tokens_ > 0 && world_size_ > 1)
    throw UsageError("max_tokens", "token-budget batches run on one rank for now (ranks would draw unequal batches); "
                                   "give a fixed batch with several ranks");
  if (max_tokens_ > 0) {
    plan_epoch(0);
    steps_per_epoch_ = static_cast<int64_t>(batches_.size());
  } else {
    steps_per_epoch_ = docs_.size() / global_batch_;
  }
  if (steps_per_epoch_ == 0)
    throw UsageError("global_batch", fmt::format("{} is more than the {} training documents of {}; give a smaller "
                                                 "batch or more documents",
                                                 global_batch_, docs_.size(), name_));
}

void TextTrainData::plan_epoch(int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  if (max_tokens_ > 0) {
    TokenBudgetOptions o;
    o.max_tokens = max_tokens_;
    o.max_items = std::max<int64_t>(0, global_batch_);
    o.seed = seed_;
    batches_ = token_budget_batches(docs_.lengths, o, epoch);
  } else {
    order_ = epoch_order(docs_.size(), seed_, epoch, ShardOptions{});
  }
}

void TextTrainData::set_shares(const std::vector<int64_t>& shares) {
  if (max_tokens_ > 0) TrainData::set_shares(shares);  // token budgets: no shares
  slice_ = rank_slice(global_batch_, rank_, world_size_, shares);
}

Batch TextTrainData::batch_for_step(int64_t step) {
  plan_epoch(step / steps_per_epoch_);
  const int64_t in_epoch = step % steps_per_epoch_;
  if (max_tokens_ > 0) {
    // an epoch's batch count can differ from the first's: wrap within this epoch's batches
    return text_batch(docs_, batches_[static_cast<size_t>(in_epoch % static_cast<int64_t>(batches_.size()))]);
  }
  const int64_t first = in_epoch * global_batch_ + slice_.offset;
  return text_batch(docs_, std::vector<int64_t>(order_.begin() + first, order_.begin() + first + slice_.count));
}

TextEvalData::TextEvalData(TextDocs docs, int64_t batch) : docs_(std::move(docs)), batch_(batch) {
  if (batch_ <= 0) throw UsageError("eval_batch", fmt::format("{} is not a positive integer", batch_));
}

std::optional<Batch> TextEvalData::next() {
  if (next_ >= docs_.size()) return std::nullopt;
  const int64_t n = std::min(batch_, docs_.size() - next_);
  std::vector<int64_t> items(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) items[static_cast<size_t>(i)] = next_ + i;
  next_ += n;
  return text_batch(docs_, items);
}

WorstCaseTextSource::WorstCaseTextSource(const TextDocs& docs, torch::Device device, bool median)
    : docs_(docs), device_(device), order_(docs.lengths, "data"), median_(median) {}

Batch WorstCaseTextSource::next(int64_t batch) {
  const Batch b = text_batch(docs_, median_ ? order_.median_items(batch) : order_.worst_items(batch));
  return {b.inputs.to(device_), b.targets.to(device_)};
}

}  // namespace saturate

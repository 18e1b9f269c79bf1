// Implements: `--data text:FILE` for token models (gpt, or a TorchScript model with `tokens`):
// one document per line, byte-level tokens (vocabulary 256), each document cut to `seq_len` + 1
// bytes and empty lines dropped. A batch is padded to its longest document: inputs [B, L] with
// 0 after each document's end, targets the inputs shifted by one with -100 (ignored by the loss)
// on the padding, so the loss is a mean over real tokens. Right padding under a causal model
// needs no attention mask: no real token attends to a later position, and the padding's
// positions are never scored. The last `val_fraction` of the documents is held out.
//
// Variable lengths are what the first batches hide (issue #26): WorstCaseTextSource gives a
// search the costliest batch of every size (the longest documents, data/worst_case.h), so its
// answer holds for every batch the epoch draws; TextTrainData draws fixed-size batches or, with
// a token budget, batches of similar lengths up to it (data/token_budget.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "saturate/data/worst_case.h"
#include "saturate/probe/probe_hooks.h"
#include "saturate/data/batch_plan.h"
#include "saturate/data/train_data.h"

namespace saturate {

/// Documents back to back: document i is bytes[offsets[i], offsets[i] + lengths[i]).
struct TextDocs {
  torch::Tensor bytes;  ///< uint8
  std::vector<int64_t> offsets;
  std::vector<int64_t> lengths;
  int64_t size() const { return static_cast<int64_t>(lengths.size()); }
};

struct TextCorpus {
  TextDocs train;
  TextDocs val;            ///< held out (may be empty)
  std::string name;
  int64_t truncated = 0;   ///< documents cut to seq_len + 1 bytes
  int64_t dropped = 0;     ///< lines under 2 bytes (no next token to predict)
};

/// "text:FILE".
bool is_text_data(const std::string& data);
/// Reads `path` (UsageError naming it when missing, not a regular file, or holding no document
/// of 2 bytes or more for training); the last `val_fraction` (0 <= f < 1) of the documents is held out.
TextCorpus read_text_corpus(const std::string& path, double val_fraction, int64_t seq_len);

/// The padded batch of documents `items`: inputs [B, L-1] and targets [B, L-1] (L the longest).
Batch text_batch(const TextDocs& docs, const std::vector<int64_t>& items);

class TextTrainData final : public TrainData {
 public:
  /// `global_batch` documents per step over all ranks, this rank its `rank`-th share, in an order
  /// drawn from (seed, epoch); with `max_tokens` > 0, batches of similar lengths up to that many
  /// padded tokens instead (global_batch then caps a batch's documents, 0: no cap; one rank only).
  /// `shares`: one count of documents per rank summing to global_batch (rank r the documents after
  /// ranks 0..r-1's in every global batch); empty: equal.
  TextTrainData(const TextCorpus& corpus, int64_t global_batch, uint64_t seed, int rank = 0, int world_size = 1,
                int64_t max_tokens = 0, const std::vector<int64_t>& shares = {});
  std::string name() const override { return name_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  Batch batch_for_step(int64_t step) override;
  /// This rank's part of every global batch by `shares` from the next step on.
  void set_shares(const std::vector<int64_t>& shares) override;

 private:
  void plan_epoch(int64_t epoch);
  TextDocs docs_;
  int64_t global_batch_, max_tokens_, steps_per_epoch_ = 0;
  uint64_t seed_;
  int rank_, world_size_;
  RankSlice slice_;  // this rank's documents of every global batch (fixed batches)
  std::string name_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;                 // fixed batches: this epoch's document order
  std::vector<std::vector<int64_t>> batches_;  // token budget: this epoch's batches
};

class TextEvalData final : public EvalData {
 public:
  TextEvalData(TextDocs docs, int64_t batch);
  void restart() override { next_ = 0; }
  std::optional<Batch> next() override;

 private:
  TextDocs docs_;
  int64_t batch_, next_ = 0;
};

/// A search's batches from the text: at every size the longest documents (the worst case), on
/// the workload's device; with `median`, the documents around the median length instead (a
/// typical batch, to compare with). `worst()` says which they were.
class WorstCaseTextSource final : public BatchSource {
 public:
  WorstCaseTextSource(const TextDocs& docs, torch::Device device, bool median = false);
  Batch next(int64_t batch) override;
  const WorstCaseOrder& worst() const { return order_; }

 private:
  const TextDocs& docs_;
  torch::Device device_;
  WorstCaseOrder order_;
  bool median_ = false;
};

}  // namespace saturate

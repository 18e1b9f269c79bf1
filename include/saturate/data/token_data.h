// Implements: language-model data for `saturate train` on token models (gpt, or a TorchScript
// model with --tokens). `--data tokens:FILE`: the file's bytes are the tokens (a byte-level
// vocabulary of 256, so the model's vocabulary must be at least 256). The text is cut into
// windows of seq_len + 1 bytes; an epoch visits the training windows in a permutation drawn
// from the seed and the epoch (the same in every process), each sample's targets are its inputs
// shifted by one (next-token prediction). The last `val_fraction` of the file is held out and
// read in order by TokenEvalData. `--data synthetic`: random token ids, reproducible per step.
// No loader threads: the corpus is in memory and a global batch is gathered when asked, so
// nothing is prefetched beside the batch in use.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "saturate/data/batch_plan.h"
#include "saturate/data/train_data.h"

namespace saturate {

struct TokenCorpus {
  torch::Tensor train;  ///< uint8 tokens of the training part
  torch::Tensor val;    ///< uint8 tokens of the held-out part (may be empty)
  std::string name;
};

/// "tokens:FILE" or "synthetic" with a token model.
bool is_token_data(const std::string& data);
/// The bytes of `path` for `data` KIND:PATH: a regular file read to its size (no device, folder
/// or /proc file), refused when twice its size exceeds the CPU budget; UsageError naming it.
std::vector<uint8_t> read_corpus_file(const std::string& kind, const std::string& path);
/// Reads `path` (UsageError naming it when missing, empty or too short for one window of each
/// split) and splits it: the last `val_fraction` (0 <= f < 1) is held out.
TokenCorpus read_token_corpus(const std::string& path, double val_fraction, int64_t seq_len);

/// Windows in an epoch of synthetic tokens (no corpus).
constexpr int64_t kSyntheticTokenSamples = 8192;

class TokenTrainData final : public TrainData {
 public:
  /// `corpus` empty (undefined train tensor): synthetic ids below `vocab`, `synthetic_samples` a
  /// epoch. `global_batch` is the batch of all ranks; this rank takes its `rank`-th share: equal,
  /// or `shares` (one count per rank, summing to global_batch: rank r the windows after ranks
  /// 0..r-1's in every global batch).
  TokenTrainData(const TokenCorpus& corpus, int64_t seq_len, int64_t vocab, int64_t global_batch, uint64_t seed,
                 int rank = 0, int world_size = 1, int64_t synthetic_samples = kSyntheticTokenSamples,
                 const std::vector<int64_t>& shares = {});
  std::string name() const override { return name_; }
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  Batch batch_for_step(int64_t step) override;
  /// This rank's part of every global batch by `shares` from the next step on.
  void set_shares(const std::vector<int64_t>& shares) override;

 private:
  torch::Tensor tokens_;
  int64_t seq_len_, vocab_, global_batch_, windows_, steps_per_epoch_ = 0;
  uint64_t seed_;
  int rank_, world_size_;
  RankSlice slice_;  // this rank's windows of every global batch
  std::string name_;
  int64_t epoch_ = -1;
  torch::Tensor order_;  // this epoch's window order
};

class TokenEvalData final : public EvalData {
 public:
  TokenEvalData(torch::Tensor tokens, int64_t seq_len, int64_t batch);
  void restart() override { next_ = 0; }
  std::optional<Batch> next() override;

 private:
  torch::Tensor tokens_;
  int64_t seq_len_, batch_, windows_, next_ = 0;
};

}  // namespace saturate

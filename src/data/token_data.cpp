#include "saturate/data/token_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {
namespace {

/// Windows [start, start + seq_len + 1) of `tokens` at window indices `idx`: inputs and targets.
Batch gather_windows(const torch::Tensor& tokens, const torch::Tensor& idx, int64_t seq_len) {
  const torch::Tensor starts = idx.to(torch::kLong) * seq_len;
  const torch::Tensor pos = starts.unsqueeze(1) + torch::arange(seq_len + 1, torch::kLong).unsqueeze(0);
  const torch::Tensor w = tokens.index({pos}).to(torch::kLong);
  return {w.slice(1, 0, seq_len).contiguous(), w.slice(1, 1, seq_len + 1).contiguous()};
}

}  // namespace

bool is_token_data(const std::string& data) { return data.rfind("tokens:", 0) == 0; }

std::vector<uint8_t> read_corpus_file(const std::string& kind, const std::string& path) {
  // a regular file, read to its size and no further: never a device, a folder or /proc's endless files
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UsageError(fmt::format("`data` {}:{}: cannot open the file ({}); give a readable text file", kind, path,
                                 std::strerror(errno)));
  if (!S_ISREG(st.st_mode) || (st.st_size == 0 && path.rfind("/proc/", 0) == 0))
    throw UsageError(fmt::format("`data` {}:{}: {}, not a regular file; give a text file", kind, path,
                                 S_ISDIR(st.st_mode) ? "a folder" : "a device, a FIFO or a file of the kernel's"));
  const int64_t budget = cpu_memory_counters().budget_bytes;
  if (budget > 0 && 2 * static_cast<int64_t>(st.st_size) > budget)
    throw UsageError(fmt::format("`data` {}:{}: {} of text take {} as tokens (the text and its splits), more "
                                 "than the `memory_budget` {}; give a shorter text or a larger budget",
                                 kind, path, format_bytes(st.st_size), format_bytes(2 * st.st_size), format_bytes(budget)));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("`data` {}:{}: cannot open the file ({}); give a readable text file", kind, path,
                                        std::strerror(errno)));
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  in.read(reinterpret_cast<char*>(bytes.data()), st.st_size);
  if (in.bad() || in.gcount() != st.st_size)
    throw UsageError(fmt::format("`data` {}:{}: read {} of its {} bytes ({}); give a readable text file", kind, path,
                                 in.gcount(), st.st_size, std::strerror(errno)));
  return bytes;
}

TokenCorpus read_token_corpus(const std::string& path, double val_fraction, int64_t seq_len) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw UsageError("val_fraction", fmt::format("{} is outside [0, 1); e.g. 0.1 holds out the last 10 % of the text",
                                 val_fraction));
  std::vector<uint8_t> bytes = read_corpus_file("tokens", path);
  const int64_t n = static_cast<int64_t>(bytes.size());
  const int64_t val = static_cast<int64_t>(static_cast<double>(n) * val_fraction);
  const int64_t train = n - val;
  if (train < seq_len + 1 || (val > 0 && val < seq_len + 1))
    throw UsageError(fmt::format("`data` tokens:{}: {} bytes leave {} for training and {} held out; each needs at "
                                 "least one window of `seq_len` + 1 = {} bytes: use a longer text or a shorter "
                                 "`seq_len`",
                                 path, n, train, val, seq_len + 1));
  TokenCorpus c;
  const torch::Tensor all = torch::from_blob(bytes.data(), {n}, torch::kUInt8).clone();
  c.train = all.slice(0, 0, train).clone();
  if (val > 0) c.val = all.slice(0, train, n).clone();
  c.name = "tokens:" + path;
  return c;
}

TokenTrainData::TokenTrainData(const TokenCorpus& corpus, int64_t seq_len, int64_t vocab, int64_t global_batch,
                               uint64_t seed, int rank, int world_size, int64_t synthetic_samples,
                               const std::vector<int64_t>& shares)
    : tokens_(corpus.train), seq_len_(seq_len), vocab_(vocab), global_batch_(global_batch), seed_(seed),
      rank_(rank), world_size_(world_size), name_(corpus.train.defined() ? corpus.name : "synthetic tokens") {
  if (seq_len_ <= 0) throw UsageError("seq_len", fmt::format("{} is not a positive number of tokens", seq_len_));
  if (global_batch_ <= 0 || (shares.empty() && global_batch_ % world_size_ != 0))
    throw UsageError("global_batch", fmt::format("{} does not split over {} rank(s)", global_batch_, world_size_));
  slice_ = rank_slice(global_batch_, rank_, world_size_, shares);
  if (tokens_.defined() && vocab_ < 256)
    throw UsageError(fmt::format("`vocab` {}: `data` tokens: is byte-level (256 token ids); give `vocab` 256 or more",
                                 vocab_));
  windows_ = tokens_.defined() ? (tokens_.numel() - 1) / seq_len_ : synthetic_samples;
  steps_per_epoch_ = windows_ / global_batch_;
}

void TokenTrainData::set_shares(const std::vector<int64_t>& shares) {
  slice_ = rank_slice(global_batch_, rank_, world_size_, shares);
}

Batch TokenTrainData::batch_for_step(int64_t step) {
  const int64_t epoch = step / std::max<int64_t>(1, steps_per_epoch_);
  const int64_t share = slice_.count;
  if (!tokens_.defined()) {  // synthetic: ids drawn from (seed, step), the same in every process
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003ull + static_cast<uint64_t>(step));
    const torch::Tensor ids = torch::randint(vocab_, {global_batch_, seq_len_ + 1}, gen, torch::kLong);
    const torch::Tensor mine = ids.slice(0, slice_.offset, slice_.offset + share);
    return {mine.slice(1, 0, seq_len_).contiguous(), mine.slice(1, 1, seq_len_ + 1).contiguous()};
  }
  if (epoch != epoch_) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003ull + static_cast<uint64_t>(epoch));
    order_ = torch::randperm(windows_, gen, torch::kLong);
    epoch_ = epoch;
  }
  const int64_t first = (step % steps_per_epoch_) * global_batch_ + slice_.offset;
  return gather_windows(tokens_, order_.slice(0, first, first + share), seq_len_);
}

TokenEvalData::TokenEvalData(torch::Tensor tokens, int64_t seq_len, int64_t batch)
    : tokens_(std::move(tokens)), seq_len_(seq_len), batch_(batch), windows_((tokens_.numel() - 1) / seq_len) {
  if (batch_ <= 0) throw UsageError("eval_batch", fmt::format("{} is not a positive integer", batch_));
}

std::optional<Batch> TokenEvalData::next() {
  if (next_ >= windows_) return std::nullopt;
  const int64_t n = std::min(batch_, windows_ - next_);
  Batch b = gather_windows(tokens_, torch::arange(next_, next_ + n, torch::kLong), seq_len_);
  next_ += n;
  return b;
}

}  // namespace saturate

// Byte-level language-model data: next-token targets, a held-out end of the text, the same
// global batches in every process whatever the rank split.
#include "saturate/data/token_data.h"

#include <fstream>

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::string write_text(const std::string& name, const std::string& text) {
  // one fresh directory per file: temp_dir empties an existing one
  const std::string path = saturate::testing::temp_dir("token_data_" + name) + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string pangrams(int copies) {
  std::string s;
  for (int i = 0; i < copies; ++i) s += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
  return s;
}

}  // namespace

TEST(TokenDataTest, TargetsAreTheInputsShiftedByOneToken) {
  const std::string text = pangrams(40);
  const TokenCorpus c = read_token_corpus(write_text("a.txt", text), 0.0, 16);
  TokenTrainData data(c, 16, 256, 8, /*seed=*/1);
  const Batch b = data.batch_for_step(0);
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{8, 16}));
  EXPECT_TRUE(torch::equal(b.inputs.slice(1, 1, 16), b.targets.slice(1, 0, 15)));
  // every row is a window of the text at a multiple of 16
  for (int64_t r = 0; r < 8; ++r) {
    std::string row;
    for (int64_t i = 0; i < 16; ++i) row += static_cast<char>(b.inputs[r][i].item<int64_t>());
    const size_t at = text.find(row);
    ASSERT_NE(at, std::string::npos) << row;
  }
}

TEST(TokenDataTest, TheHeldOutEndOfTheTextIsNeverTrainedOn) {
  const std::string text = pangrams(100);
  const TokenCorpus c = read_token_corpus(write_text("b.txt", text), 0.2, 16);
  const int64_t val = static_cast<int64_t>(static_cast<double>(text.size()) * 0.2);
  EXPECT_EQ(c.val.numel(), val);
  EXPECT_EQ(c.train.numel() + c.val.numel(), static_cast<int64_t>(text.size()));
  TokenEvalData eval(c.val, 16, 4);
  int64_t windows = 0;
  while (auto b = eval.next()) windows += b->inputs.size(0);
  EXPECT_EQ(windows, (val - 1) / 16);
}

TEST(TokenDataTest, RanksSplitTheSameGlobalBatch) {
  const TokenCorpus c = read_token_corpus(write_text("c.txt", pangrams(100)), 0.0, 8);
  TokenTrainData one(c, 8, 256, 12, 5);
  TokenTrainData r0(c, 8, 256, 12, 5, 0, 2), r1(c, 8, 256, 12, 5, 1, 2);
  for (int64_t step : {0, 3, 7}) {
    const Batch whole = one.batch_for_step(step);
    Batch both;
    both.inputs = torch::cat({r0.batch_for_step(step).inputs, r1.batch_for_step(step).inputs});
    EXPECT_TRUE(torch::equal(whole.inputs, both.inputs)) << "step " << step;
  }
}

TEST(TokenDataTest, ABatchDependsOnlyOnItsStepSoAResumedRunSeesTheSameData) {
  const TokenCorpus c = read_token_corpus(write_text("d.txt", pangrams(100)), 0.0, 8);
  TokenTrainData a(c, 8, 256, 4, 9), b(c, 8, 256, 4, 9);
  (void)a.batch_for_step(0);
  (void)a.batch_for_step(1);
  EXPECT_TRUE(torch::equal(a.batch_for_step(2).inputs, b.batch_for_step(2).inputs));
  TokenTrainData synthetic(TokenCorpus{}, 8, 512, 4, 9), again(TokenCorpus{}, 8, 512, 4, 9);
  EXPECT_TRUE(torch::equal(synthetic.batch_for_step(5).inputs, again.batch_for_step(5).inputs));
  EXPECT_LT(synthetic.batch_for_step(5).inputs.max().item<int64_t>(), 512);
}

TEST(TokenDataTest, ShortTextsSmallVocabulariesAndBadFractionsAreUsageErrors) {
  ASSERT_THROWS_WITH(read_token_corpus(write_text("e.txt", "tiny"), 0.0, 16), UsageError, "`seq_len`");
  ASSERT_THROWS_WITH(read_token_corpus("/nonexistent/x.txt", 0.0, 16), UsageError, "cannot open");
  ASSERT_USAGE_ERROR_ABOUT(read_token_corpus(write_text("f.txt", pangrams(10)), 1.0, 16), "val_fraction",
                           "1 is outside [0, 1)");  // the command line adds --val-fraction
  const TokenCorpus c = read_token_corpus(write_text("g.txt", pangrams(10)), 0.0, 16);
  ASSERT_THROWS_WITH(TokenTrainData(c, 16, 100, 4, 0), UsageError, "`vocab` 100");
}

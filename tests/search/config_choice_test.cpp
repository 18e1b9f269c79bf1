// Choosing among configurations of one step (search/config_choice.h), on fake searches: the
// baseline stays unless another is measurably faster, a required batch decides first, and a
// configuration that fits nothing required leaves the baseline with the reason saying so.
#include "saturate/search/config_choice.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

/// A search whose ok trials ran at `rates` (batch -> samples/s), recommending `recommended`.
SearchResult searched(std::vector<std::pair<int64_t, double>> rates, int64_t max_batch, int64_t recommended) {
  SearchResult r;
  for (auto [batch, rate] : rates) {
    Trial t;
    t.batch = batch;
    t.status = TrialStatus::kOk;
    t.samples_per_s = rate;
    r.trials.push_back(t);
  }
  r.max_batch = max_batch;
  r.recommended_batch = recommended;
  return r;
}

}  // namespace

TEST(ConfigChoiceTest, TheBaselineStaysUnlessAnotherIsFasterBeyondTheTolerance) {
  const SearchResult fp32 = searched({{64, 1000}, {128, 1100}}, 128, 128);
  const SearchResult bf16_close = searched({{128, 1120}, {256, 1125}}, 256, 256);  // +2.3 %: noise
  const SearchResult bf16_fast = searched({{128, 1500}, {256, 1900}}, 256, 256);   // +73 %
  EXPECT_EQ(choose_config({fp32, bf16_close}, {"fp32", "bf16"}, 0).chosen, 0u);
  const ConfigChoice c = choose_config({fp32, bf16_fast}, {"fp32", "bf16"}, 0);
  EXPECT_EQ(c.chosen, 1u);
  EXPECT_EQ(c.best[1].batch, 256);
  EXPECT_NE(c.reason.find("+72.7 %"), std::string::npos) << c.reason;
}

TEST(ConfigChoiceTest, OnlyBatchesWithinTheRecommendationCount) {
  // the fast trial above the recommended batch is not usable
  const SearchResult base = searched({{64, 1000}}, 64, 64);
  const SearchResult other = searched({{64, 900}, {512, 5000}}, 512, 256);
  EXPECT_EQ(choose_config({base, other}, {"a", "b"}, 0).chosen, 0u);
}

TEST(ConfigChoiceTest, ARequiredBatchIsMetFirstEvenBySlowerConfigurations) {
  const SearchResult none = searched({{64, 2000}}, 100, 100);
  const SearchResult blocks = searched({{128, 1500}}, 200, 200);
  const ConfigChoice c = choose_config({none, blocks}, {"none", "blocks"}, 120);
  EXPECT_EQ(c.chosen, 1u);
  EXPECT_NE(c.reason.find("only fits with blocks"), std::string::npos) << c.reason;
  const ConfigChoice nobody = choose_config({none, blocks}, {"none", "blocks"}, 1000);
  EXPECT_EQ(nobody.chosen, 0u);
  EXPECT_NE(nobody.reason.find("no configuration fits the required batch 1000"), std::string::npos);
}

TEST(ConfigChoiceTest, MismatchedInputsAreRefusedByName) {
  ASSERT_USAGE_ERROR_ABOUT(choose_config({}, {}, 0), "configs", "at least one");
}

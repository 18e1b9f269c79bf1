// The user's data for a session (session/data_session.h): `workers` and `val_fraction` as
// written, the model's shape and classes taken from the data where unset, and the data a
// training run reads, refused by name when it cannot feed the model.
#include "saturate/session/data_session.h"

#include <fstream>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

TEST(DataSessionTest, WorkersAreACountWithinTheMachineOrAuto) {
  EXPECT_EQ(parse_workers("auto"), -1);
  EXPECT_EQ(parse_workers("0"), 0);
  EXPECT_EQ(parse_workers(std::to_string(max_loader_threads())), max_loader_threads());
  ASSERT_USAGE_ERROR_ABOUT(parse_workers("two"), "workers", "'two' is not a count of loader threads");
  ASSERT_USAGE_ERROR_ABOUT(parse_workers(std::to_string(max_loader_threads() + 1)), "workers", "at most 4 per core");
  ASSERT_USAGE_ERROR_ABOUT(parse_workers("-1"), "workers", "is outside");
}

TEST(DataSessionTest, AValFractionIsAShareBelowOne) {
  EXPECT_DOUBLE_EQ(parse_val_fraction("0.25"), 0.25);
  ASSERT_USAGE_ERROR_ABOUT(parse_val_fraction("1"), "val_fraction", "1 is outside [0, 1)");
  ASSERT_USAGE_ERROR_ABOUT(parse_val_fraction("lots"), "val_fraction", "'lots' is not a number");
}

TEST(DataSessionTest, TheModelTakesTheDatasShapeAndClassesWhereTheyAreUnset) {
  WorkloadOptions w;
  w.model.name = "mlp";
  DataOptions d;
  d.data = "synthetic";
  w.model.input_shape = {3, 8, 8};
  w.model.classes = 7;
  const OpenedData opened = open_data(d, w);
  ASSERT_TRUE(opened.dataset);
  EXPECT_EQ(opened.dataset->shape().channels, 3);  // synthetic data takes the model's shape
  EXPECT_EQ(opened.dataset->classes(), 7);
  EXPECT_EQ(opened.workers, -1);
  WorkloadOptions unset;
  unset.model.name = "mlp";
  DataOptions fashion;
  fashion.data = "fashion-mnist";
  open_data(fashion, unset);
  EXPECT_EQ(unset.model.input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(unset.model.classes, 10);
  WorkloadOptions too_few = unset;
  too_few.model.classes = 5;
  ASSERT_USAGE_ERROR_ABOUT(open_data(fashion, too_few), "", "has 10 classes but `classes` is 5");
}

TEST(DataSessionTest, DataThatCannotFeedTheModelIsRefusedByName) {
  WorkloadOptions gpt;
  gpt.model.name = "gpt";
  DataOptions images;
  images.data = "synthetic";
  ASSERT_USAGE_ERROR_ABOUT(open_data(images, gpt), "", "`data` feeds image classifiers");
  DataOptions none;
  none.val_fraction = "0.2";
  WorkloadOptions mlp;
  mlp.model.name = "mlp";
  ASSERT_USAGE_ERROR_ABOUT(open_data(none, mlp), "", "`val_fraction` 0.2 needs `data`");
  DataOptions tokens;
  tokens.data = "tokens:/nonexistent.txt";
  ASSERT_USAGE_ERROR_ABOUT(trains_on_tokens(tokens, mlp.model), "", "token data feeds token models");
  EXPECT_TRUE(trains_on_tokens(tokens, gpt.model));
  EXPECT_TRUE(trains_on_tokens(images, gpt.model));  // synthetic data for a token model: synthetic tokens
  EXPECT_FALSE(trains_on_tokens(images, mlp.model));
}

TEST(DataSessionTest, ATokenCorpusHoldsOutItsLastTenthByDefault) {
  const std::string dir = saturate::testing::temp_dir("data_session_tokens");
  const std::string path = dir + "/corpus.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 400; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  DataOptions d;
  d.data = "tokens:" + path;
  d.workers = "3";
  std::string note;
  const TrainSessionData t = train_session_data(d, {}, /*tokens=*/true, 16, note);
  EXPECT_TRUE(t.tokens);
  EXPECT_EQ(t.workers, 3);
  ASSERT_TRUE(t.corpus.train.defined() && t.corpus.val.defined());
  const double share = static_cast<double>(t.corpus.val.numel()) / (t.corpus.train.numel() + t.corpus.val.numel());
  EXPECT_NEAR(share, 0.1, 0.02);
  EXPECT_EQ(t.eval_split(), "val");
}

namespace saturate {
namespace {

DistEnv rank_of(int rank, int world) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  return e;
}

// issue 28: unequal GPUs, each rank its own budget: "48MiB,32MiB" gives rank r the r-th value
TEST(RankBudgetTest, AListGivesEachRankItsOwnBudgetAndOneValueIsEveryRanks) {
  EXPECT_EQ(rank_budget("48MiB,32MiB", rank_of(0, 2)), "48MiB");
  EXPECT_EQ(rank_budget("48MiB,32MiB", rank_of(1, 2)), "32MiB");
  EXPECT_EQ(rank_budget("64MiB", rank_of(1, 2)), "64MiB");
  EXPECT_EQ(rank_budget("0.5", rank_of(0, 1)), "0.5");
}

TEST(RankBudgetTest, AListOfAnotherLengthThanTheRanksOrWithAnEmptyValueIsAUsageErrorNamingIt) {
  try {
    rank_budget("48MiB,32MiB", rank_of(0, 1));
    FAIL() << "a list on one process was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("48MiB,32MiB gives 2 budgets, one a rank, but the run has 1 rank(s)"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(rank_budget("48MiB,,32MiB", rank_of(1, 3)), UsageError);
  EXPECT_THROW(rank_budget("48MiB,32MiB,16MiB", rank_of(0, 2)), UsageError);
}

}  // namespace
}  // namespace saturate

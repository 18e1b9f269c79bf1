#include "saturate/core/option_text.h"

#include "support/support.h"

using namespace saturate;

namespace {
// a front-end that knows two options
std::optional<std::string> flag_of(const std::string& option) {
  if (option == "micro_batch") return std::string("--batch");
  if (option == "global_batch") return std::string("--global-batch");
  return std::nullopt;
}
}  // namespace

TEST(NameOptions, ReplacesABacktickedOptionByItsNameAndDropsTheBackticks) {
  EXPECT_EQ(name_options("`objective` goodput chooses the micro-batch: give `micro_batch` auto", flag_of),
            "`objective` goodput chooses the micro-batch: give --batch auto");
}

TEST(NameOptions, ReplacesEveryOptionItKnowsWhereverItStands) {
  EXPECT_EQ(name_options("`global_batch`: not a multiple of `micro_batch`", flag_of),
            "--global-batch: not a multiple of --batch");
  EXPECT_EQ(name_options("(`micro_batch`)", flag_of), "(--batch)");
  EXPECT_EQ(name_options("`micro_batch``global_batch`", flag_of), "--batch--global-batch");
}

TEST(NameOptions, LeavesAnOptionTheFrontEndDoesNotNameExactlyAsItWas) {
  EXPECT_EQ(name_options("give `objective` memory or `micro_batch` 8", flag_of), "give `objective` memory or --batch 8");
}

TEST(NameOptions, LeavesBacktickedTextThatIsNoOptionNameAlone) {
  for (const char* text : {"`x + 1`", "`Micro_batch`", "`2nd`", "``", "`micro-batch`", "`_a`", "a ` b", "`micro_batch",
                           "micro_batch`", "`micro_batch `", "no backticks at all", ""})
    EXPECT_EQ(name_options(text, flag_of), text);
}

TEST(NameOptions, FindsAnOptionAfterBacktickedTextThatIsNone) {
  EXPECT_EQ(name_options("`x + 1` and `micro_batch`", flag_of), "`x + 1` and --batch");
  EXPECT_EQ(name_options("`a b` `global_batch`", flag_of), "`a b` --global-batch");
}

TEST(NameOptions, AsksTheFrontEndOnlyAboutOptionNames) {
  std::vector<std::string> asked;
  name_options("`micro_batch`, `x + 1`, `seq_len2` and `Eval`", [&](const std::string& option) {
    asked.push_back(option);
    return std::optional<std::string>();
  });
  EXPECT_EQ(asked, (std::vector<std::string>{"micro_batch", "seq_len2"}));
}

TEST(NameOptions, AFrontEndWithoutFlagsReadsTheOptionNameWithoutBackticks) {
  EXPECT_EQ(name_options("give `micro_batch` auto", [](const std::string& o) { return std::optional<std::string>(o); }),
            "give micro_batch auto");
}

// The options' documentation (core/option_doc.h): one entry per key, ranges that can be met,
// help that names only documented options, and range checks that name the option.
#include "saturate/core/option_doc.h"

#include <cmath>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

TEST(OptionDocTest, EveryKeyIsDocumentedOnceWithHelp) {
  std::set<std::string_view> keys;
  for (const OptionDoc& d : option_docs()) {
    EXPECT_TRUE(keys.insert(d.key).second) << "documented twice: " << d.key;
    EXPECT_FALSE(d.help.empty()) << d.key;
  }
  EXPECT_GT(keys.size(), 50u);
}

// issue 44: ~50 flags in one list; --help groups them by these headings
TEST(OptionDocTest, EveryKeyHasAHelpHeadingAndOnlyFilesAreOutput) {
  std::set<std::string_view> headings;
  for (const OptionDoc& d : option_docs()) {
    const std::string_view group = option_group(d.key);
    headings.insert(group);
    if (d.key != "json" && d.key != "html") {
      EXPECT_NE(group, "Output") << d.key << " has no heading of its own";
    }
  }
  EXPECT_EQ(headings.size(), 9u);
  EXPECT_EQ(option_group("format"), "Output");  // the command line's own options
}

TEST(OptionDocTest, EveryRangeCanBeMetAndSaysWhatAValueMeans) {
  for (const OptionDoc& d : option_docs()) {
    if (!d.has_range()) continue;
    EXPECT_LE(d.min, d.max) << d.key;
    EXPECT_FALSE(d.meaning.empty()) << d.key;
    EXPECT_NO_THROW(check_option_range(d.key, d.min)) << d.key;
    EXPECT_NO_THROW(check_option_range(d.key, d.max)) << d.key;
  }
}

TEST(OptionDocTest, HelpNamesOnlyOptionsThatAreDocumented) {
  std::set<std::string> names;
  for (const OptionDoc& d : option_docs()) names.insert(std::string(option_name(d.key)));
  const std::regex backticked("`([a-z][a-z0-9_]*)`");
  for (const OptionDoc& d : option_docs()) {
    const std::string text = std::string(d.help) + " " + std::string(d.meaning);
    for (std::sregex_iterator it(text.begin(), text.end(), backticked), end; it != end; ++it)
      EXPECT_TRUE(names.count((*it)[1].str())) << d.key << " names `" << (*it)[1].str() << "`, which is not documented";
  }
}

TEST(OptionDocTest, AValueOutsideTheRangeIsAUsageErrorAboutTheOptionWithoutItsCommand) {
  try {
    check_option_range("train.target_fraction", 1.5);
    FAIL() << "1.5 passed";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.option(), "target_fraction");
    EXPECT_EQ(std::string(e.what()), "1.5 is outside 0.01..1 (a fraction of the budget, e.g. 0.9)");
  }
  EXPECT_THROW(check_option_range("adaptive_max", 1025), UsageError);
  EXPECT_THROW(check_option_range("adaptive_max", 0), UsageError);
  EXPECT_THROW(check_option_range("adaptive_max", std::nan("")), UsageError);
  EXPECT_NO_THROW(check_option_range("adaptive_max", 512));
}

TEST(OptionDocTest, AnUnknownKeyOrAnOptionWithoutARangeIsTheLibrarysBug) {
  EXPECT_EQ(find_option_doc("no_such_option"), nullptr);
  EXPECT_THROW(option_doc("no_such_option"), InternalError);
  EXPECT_THROW(check_option_range("model", 1), InternalError);  // a name, not a number
}

TEST(OptionDocTest, LimitsAreWrittenAsPeopleWriteThem) {
  EXPECT_EQ(limit_text(1024), "1024");
  EXPECT_EQ(limit_text(1e6), "1000000");
  EXPECT_EQ(limit_text(1e12), "1e+12");
  EXPECT_EQ(limit_text(0.01), "0.01");
  EXPECT_EQ(range_text(option_doc("adaptive_max")), "1..1024");
}

}  // namespace
}  // namespace saturate

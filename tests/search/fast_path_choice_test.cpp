// Choosing fast paths from measured step times: kept only when faster by the margin, compared
// with the current choice in alternating rounds, never kept when it fails.
#include "saturate/search/fast_path_choice.h"

#include <map>

#include <gtest/gtest.h>

using namespace saturate;

namespace {

/// A fake device: each switch changes the step time by a factor; channels_last can be made to OOM.
struct FakeDevice {
  std::map<std::string, double> factor;
  bool channels_last_ooms = false;
  std::vector<std::string> calls;
  Trial operator()(const FastPaths& p) {
    calls.push_back(p.to_string());
    Trial t;
    t.batch = 64;
    if (p.channels_last && channels_last_ooms) {
      t.status = TrialStatus::kOom;
      t.error = "CPU budget exhausted";
      return t;
    }
    double ms = 100;
    for (const auto& n : p.names()) ms *= factor.count(n) ? factor[n] : 1.0;
    t.status = TrialStatus::kOk;
    t.step_time_ms = ms;
    return t;
  }
};

FastPathChoice choose(FakeDevice& d, std::vector<FastPathCandidate> c, FastPathChoiceOptions o = {}) {
  return choose_fast_paths({}, c, [&](const FastPaths& p) { return d(p); }, o);
}

}  // namespace

TEST(FastPathChoiceTest, ASwitchIsKeptOnlyWhenItIsFasterByTheMargin) {
  FakeDevice d;
  d.factor = {{"channels_last", 0.8}, {"fused_optimizer", 0.99}};
  const auto c = choose(d, fast_path_candidates(false, true, true, 1));
  ASSERT_EQ(c.tried.size(), 2u);
  EXPECT_EQ(c.tried[0].name, "channels_last");
  EXPECT_TRUE(c.tried[0].kept);
  EXPECT_NEAR(c.tried[0].gain, 100.0 / 80 - 1, 1e-12);
  EXPECT_EQ(c.tried[1].name, "fused_optimizer");
  EXPECT_FALSE(c.tried[1].kept);  // 1 % is inside the 3 % a switch must gain
  EXPECT_NE(c.tried[1].note.find("below the 3 %"), std::string::npos) << c.tried[1].note;
  EXPECT_EQ(c.chosen.to_string(), "channels_last");
  EXPECT_DOUBLE_EQ(c.baseline_ms, 100);
  EXPECT_DOUBLE_EQ(c.chosen_ms, 80);
}

TEST(FastPathChoiceTest, EachCandidateIsComparedWithTheChoiceSoFarInAlternatingRounds) {
  FakeDevice d;
  d.factor = {{"channels_last", 0.5}, {"fused_optimizer", 0.9}};
  FastPathChoiceOptions o;
  o.rounds = 2;
  const auto c = choose(d, fast_path_candidates(false, true, true, 1), o);
  const std::vector<std::string> expected = {"none",          "channels_last",
                                             "none",          "channels_last",
                                             "channels_last", "channels_last,fused_optimizer",
                                             "channels_last", "channels_last,fused_optimizer"};
  EXPECT_EQ(d.calls, expected);
  EXPECT_DOUBLE_EQ(c.tried[1].baseline_ms, 50);  // against channels_last, not the start
  EXPECT_EQ(c.chosen.to_string(), "channels_last,fused_optimizer");
}

TEST(FastPathChoiceTest, ASwitchThatRunsOutOfMemoryIsNotKeptAndSaysWhy) {
  FakeDevice d;
  d.factor = {{"channels_last", 0.5}};
  d.channels_last_ooms = true;
  const auto c = choose(d, fast_path_candidates(false, true, true, 1));
  EXPECT_FALSE(c.tried[0].kept);
  EXPECT_EQ(c.tried[0].note, "oom: CPU budget exhausted");
  EXPECT_FALSE(c.chosen.channels_last);
}

TEST(FastPathChoiceTest, TheCandidatesFollowTheDeviceAndTheModel) {
  const auto names = [](const std::vector<FastPathCandidate>& c) {
    std::vector<std::string> n;
    for (const auto& x : c) n.push_back(x.name);
    return n;
  };
  EXPECT_EQ(names(fast_path_candidates(true, true, true, 16)),
            (std::vector<std::string>{"cudnn_benchmark", "tf32", "channels_last", "fused_optimizer"}));
  EXPECT_EQ(names(fast_path_candidates(true, false, false, 16)), (std::vector<std::string>{"fused_optimizer"}));
  EXPECT_EQ(names(fast_path_candidates(false, true, true, 2)),
            (std::vector<std::string>{"channels_last", "fused_optimizer", "threads=1"}));
  EXPECT_EQ(names(fast_path_candidates(false, false, true, 1)), (std::vector<std::string>{"fused_optimizer"}));
}

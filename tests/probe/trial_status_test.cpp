// A trial's status read back from the words a search's JSON writes (python's search_configs reads
// searches so): every status survives the round trip, an unknown word is refused naming it.
#include "saturate/probe/trial.h"

#include "support/support.h"

namespace saturate {
namespace {

TEST(TrialStatusTest, EveryStatusReadsBackAsTheOneWritten) {
  EXPECT_EQ(parse_trial_status("ok"), TrialStatus::kOk);
  EXPECT_EQ(parse_trial_status("oom"), TrialStatus::kOom);
  EXPECT_EQ(parse_trial_status("over-target"), TrialStatus::kOverTarget);
  EXPECT_EQ(parse_trial_status("error"), TrialStatus::kError);
  for (TrialStatus s : {TrialStatus::kOk, TrialStatus::kOom, TrialStatus::kOverTarget, TrialStatus::kError})
    EXPECT_EQ(parse_trial_status(to_string(s)), s);
}

TEST(TrialStatusTest, AnUnknownStatusIsAUsageErrorNamingItAndTheAllowedOnes) {
  ASSERT_THROWS_WITH(parse_trial_status("OOM"), UsageError, "trial status 'OOM': expected ok, oom, over-target or error");
}

}  // namespace
}  // namespace saturate

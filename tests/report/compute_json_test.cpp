// The search JSON's compute block: MFU against the peak, and a word when the load moved between
// the peak's measurement and the trials (issue 27: "re-measured or flagged when the machine's
// load changes").
#include "saturate/report/report.h"

#include "support/support.h"

namespace saturate {
namespace {

SearchResult one_trial_at(double flops_per_s) {
  SearchResult r;
  Trial t;
  t.batch = 8;
  t.status = TrialStatus::kOk;
  ComputeFinding c;
  c.flops_per_step = 8e6;
  c.flops_per_sample = 1e6;
  c.achieved_flops_per_s = flops_per_s;
  c.mfu = 0.5;
  t.findings.compute = c;
  r.trials.push_back(t);
  r.max_batch = r.recommended_batch = 8;
  return r;
}

GemmPeak peak_under(double others_busy_cpus) {
  GemmPeak p;
  p.flops_per_s = 2e9;
  p.dtype = "fp32";
  p.size = 1024;
  p.repetitions = 10;
  p.threads = 2;
  p.others_busy_cpus = others_busy_cpus;
  return p;
}

TEST(ComputeJsonTest, APeakMeasuredUnderLoadAndTrialsRunQuietSayTheLoadMoved) {
  const nlohmann::json j = compute_json(one_trial_at(1e9), peak_under(1.9), std::nullopt, "", 0.1);
  EXPECT_DOUBLE_EQ(j["mfu"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["trials_others_busy_cpus"].get<double>(), 0.1);
  ASSERT_TRUE(j.contains("load_note")) << j.dump();
  const std::string note = j["load_note"];
  EXPECT_NE(note.find("1.9 other CPUs busy while the peak was measured, 0.1 over the trials"), std::string::npos)
      << note;
  EXPECT_NE(compute_text(j).find("the load moved"), std::string::npos) << compute_text(j);
}

TEST(ComputeJsonTest, TheSameLoadThroughoutOrAnUnreadLoadSaysNothing) {
  EXPECT_FALSE(compute_json(one_trial_at(1e9), peak_under(1.9), std::nullopt, "", 1.6).contains("load_note"));
  EXPECT_FALSE(compute_json(one_trial_at(1e9), peak_under(0.0), std::nullopt, "", 0.4).contains("load_note"));
  EXPECT_FALSE(compute_json(one_trial_at(1e9), peak_under(1.9), std::nullopt).contains("load_note"));
  EXPECT_FALSE(compute_json(one_trial_at(1e9), peak_under(-1), std::nullopt, "", 0.1).contains("load_note"));
}

}  // namespace
}  // namespace saturate

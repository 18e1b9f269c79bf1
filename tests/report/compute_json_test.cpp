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

nlohmann::json json_of(const SearchResult& r, const GemmPeak& peak, std::optional<double> analytic,
                       const std::string& mfu_note = {}, double trials_others_busy_cpus = -1) {
  return to_json(compute_summary(r, peak, analytic, mfu_note, trials_others_busy_cpus));
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
  const ComputeSummary s = compute_summary(one_trial_at(1e9), peak_under(1.9), std::nullopt, "", 0.1);
  const nlohmann::json j = to_json(s);
  EXPECT_DOUBLE_EQ(j["mfu"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["trials_others_busy_cpus"].get<double>(), 0.1);
  ASSERT_TRUE(j.contains("load_note")) << j.dump();
  const std::string note = j["load_note"];
  EXPECT_NE(note.find("1.9 other CPUs busy while the peak was measured, 0.1 over the trials"), std::string::npos)
      << note;
  EXPECT_NE(compute_text(s).find("the load moved"), std::string::npos) << compute_text(s);
}

TEST(ComputeJsonTest, TheSameLoadThroughoutOrAnUnreadLoadSaysNothing) {
  EXPECT_FALSE(json_of(one_trial_at(1e9), peak_under(1.9), std::nullopt, "", 1.6).contains("load_note"));
  EXPECT_FALSE(json_of(one_trial_at(1e9), peak_under(0.0), std::nullopt, "", 0.4).contains("load_note"));
  EXPECT_FALSE(json_of(one_trial_at(1e9), peak_under(1.9), std::nullopt).contains("load_note"));
  EXPECT_FALSE(json_of(one_trial_at(1e9), peak_under(-1), std::nullopt, "", 0.1).contains("load_note"));
}

TEST(ComputeJsonTest, ARateAboveTheMeasuredPeakHasNoMfuAndBothPrintersSayWhy) {
  GemmPeak peak = peak_under(0.0);
  peak.flops_per_s = 0.5e9;  // the step ran at 1e9: above it
  const ComputeSummary s = compute_summary(one_trial_at(1e9), peak, 2e6);
  const nlohmann::json j = to_json(s);
  EXPECT_TRUE(j["mfu"].is_null()) << j.dump();
  EXPECT_EQ(j["mfu_note"], "no MFU: the step's rate is above the GEMM peak measured");
  EXPECT_EQ(j["batch"], 8);
  EXPECT_DOUBLE_EQ(j["analytic_flops_per_sample"].get<double>(), 2e6);
  const std::string text = compute_text(s);
  EXPECT_NE(text.find("at batch 8; no MFU: the step's rate is above the GEMM peak measured"), std::string::npos) << text;
  EXPECT_NE(text.find("analytic"), std::string::npos) << text;
  EXPECT_EQ(text.find("% MFU"), std::string::npos) << text;
}

TEST(ComputeJsonTest, NoTrialThatCountedFlopsPrintsNoComputeLine) {
  SearchResult r = one_trial_at(1e9);
  r.trials[0].findings.compute.reset();
  const ComputeSummary s = compute_summary(r, peak_under(0.0), std::nullopt);
  EXPECT_EQ(compute_text(s), "");
  EXPECT_FALSE(to_json(s).contains("flops_per_sample"));
}

}  // namespace
}  // namespace saturate

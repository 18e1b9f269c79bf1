// train's summary for people is read from the summary JSON: every number it shows is the JSON's.
#include "saturate/report/train_text.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

/// A one-process run's summary JSON as `saturate train` writes it (the keys the printer reads).
nlohmann::json one_process_summary() {
  return nlohmann::json::parse(R"({
    "model": {"name": "convnet", "parameters": 1234, "input": "1x28x28"},
    "data": "fashion-mnist",
    "steps": 120, "samples_seen": 7680, "epochs": 0.128,
    "micro_batch": 32, "accumulation": 2, "global_batch": 64,
    "final_train_loss": 0.61234,
    "world_size": 1, "parallel": "none", "backend": "none", "allreduce_ms": 0.0,
    "allreduce_overlap_fraction": null, "gradient_buckets": 0, "gradient_bytes": 0,
    "eval_split": "val", "final_test_loss": null, "final_test_accuracy": null,
    "final_val_loss": 0.70049, "final_val_accuracy": 0.7813,
    "samples_per_s": 1523.46,
    "oom_backoffs": [{"step": 3, "old_micro_batch": 64, "new_micro_batch": 32}],
    "checkpoints_written": 2, "resumed_from": 40,
    "interrupted": null
  })");
}

TEST(TrainTextTest, TheSummaryShowsTheJsonsNumbers) {
  const std::string text = train_summary_text(one_process_summary());
  EXPECT_EQ(text,
            "trained     convnet on fashion-mnist: 120 steps, 7680 samples, 0.13 epochs\n"
            "batch       micro 32 x 2 = global 64\n"
            "train loss  0.6123\n"
            "val         loss 0.7005, accuracy 78.13 %\n"
            "throughput  1523.5 samples/s\n"
            "oom backoffs 1\n"
            "checkpoints 2 (resumed from step 40)\n");
}

TEST(TrainTextTest, OptionalLinesAppearWithTheirKeys) {
  nlohmann::json j = one_process_summary();
  j["resumed_from"] = nullptr;
  j["eval_split"] = nullptr;
  j["bottleneck"] = {{"verdict", "data-bound"}, {"reason", "waits 40 % of the step"}, {"fix", "raise --workers"}};
  j.update(nlohmann::json::parse(R"({"world_size": 2, "parallel": "ddp", "backend": "gloo", "allreduce_ms": 3.104,
                                     "allreduce_overlap_fraction": 0.412, "gradient_buckets": 4,
                                     "gradient_bytes": 1258291})"));
  j["gradient_noise_scale"] = {{"value", 812.4}, {"measurements", 119}};
  j.update({{"flops_per_sample", 2.5e6}, {"achieved_flops_per_s", 3.8e9}, {"mfu", 0.0123},
            {"peak_flops_per_s", 3.09e11}, {"peak_method", "measured fp32 GEMM"}});
  j["interrupted"] = {{"signal", "SIGINT"}, {"exit_status", 130}, {"after_step", 120}, {"checkpoint", "ckpt"}};
  const std::string text = train_summary_text(j);
  EXPECT_NE(text.find("bottleneck  data-bound: waits 40 % of the step\nfix         raise --workers\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks       2 (gloo): all-reduce 3.10 ms per step, 41 % overlapped with backward, 4 bucket(s) "
                      "of 1.2 MiB in all\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("noise scale 812 samples (B_simple, smoothed over the last ~20 of 119 steps measured)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("compute     2.50 MFLOP/sample, 3.80 GFLOP/s = 1.2 % MFU of 309.0 GFLOP/s (measured fp32 GEMM)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("checkpoints 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("loss 0.7005"), std::string::npos) << text;  // no evaluation
  EXPECT_NE(text.find("interrupted by SIGINT after step 120: checkpoint written; continue with `resume` ckpt\n"),
            std::string::npos)
      << text;
  j["interrupted"]["checkpoint"] = nullptr;
  j["gradient_noise_scale"]["value"] = nullptr;
  const std::string without = train_summary_text(j);
  EXPECT_NE(without.find("no checkpoint (give `checkpoint_dir` DIR to keep the progress)"), std::string::npos) << without;
  EXPECT_NE(without.find("noise scale not measurable (the gradient is all noise)"), std::string::npos) << without;
}

TEST(TrainTextTest, OneProcessHasNoRanksLine) {
  EXPECT_EQ(train_rank_text(one_process_summary()), "");
}

}  // namespace
}  // namespace saturate

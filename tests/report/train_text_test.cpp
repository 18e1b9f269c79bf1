// train's summary for people is read from the typed summary (report/train_text.h): each line
// shows the summary's numbers, optional lines appear with what they report, and every number
// shown is one the train JSON holds too.
#include "saturate/report/train_text.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

/// A one-process run's summary: 120 steps of micro-batch 32 x 2 on fashion-mnist, evaluated on a
/// val split, one OOM back-off, resumed at step 40.
TrainSummary one_process_summary() {
  TrainSummary s;
  s.context.model_name = "convnet";
  s.data = "fashion-mnist";
  TrainResult& r = s.result;
  r.steps = 120;
  r.samples_seen = 7680;
  r.epochs = 0.128;
  r.micro_batch = 32;
  r.accumulation = 2;
  r.global_batch = 64;
  r.final_train_loss = 0.61234;
  s.eval_split = "val";
  r.final_test_loss = 0.70049;
  r.final_test_accuracy = 0.7813;
  r.samples_per_s = 1523.46;
  r.oom_backoffs.push_back({3, 64, 32});
  r.checkpoints_written = 2;
  r.resumed_from = 40;
  return s;
}

TEST(TrainTextTest, TheSummaryShowsTheRunsNumbers) {
  EXPECT_EQ(train_summary_text(one_process_summary(), {}),
            "trained     convnet on fashion-mnist: 120 steps, 7680 samples, 0.13 epochs\n"
            "batch       micro 32 x 2 = global 64\n"
            "train loss  0.6123\n"
            "val         loss 0.7005, accuracy 78.13 %\n"
            "throughput  1523.5 samples/s\n"
            "oom backoffs 1\n"
            "checkpoints 2 (resumed from step 40)\n");
}

TEST(TrainTextTest, OptionalLinesAppearWithWhatTheyReport) {
  TrainSummary s = one_process_summary();
  s.result.resumed_from.reset();
  s.eval_split = "";
  s.monitor = TrainMonitorSummary{};
  s.monitor->bottleneck = BottleneckFinding{"data-bound", "waits 40 % of the step", {}, "raise `workers`", {}};
  TrainRanksSummary ranks;
  ranks.world_size = 2;
  ranks.parallel = "ddp";
  ranks.backend = "gloo";
  ranks.allreduce_ms = 3.104;
  ranks.allreduce_overlap_fraction = 0.412;
  ranks.gradient_buckets = 4;
  ranks.gradient_bytes = 1258291;
  s.noise = TrainNoiseSummary{812.4, 0, 0, 119};
  s.compute = TrainCompute{2.5e6, std::nullopt, 3.8e9, 3.09e11, "measured fp32 GEMM", 0.0123, ""};
  s.interrupted = TrainInterruption{"SIGINT", 130, 120, "ckpt"};
  const std::string text = train_summary_text(s, ranks);
  EXPECT_NE(text.find("bottleneck  data-bound: waits 40 % of the step\nfix         raise `workers`\n"),
            std::string::npos)
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
  s.interrupted->checkpoint = "";
  s.noise->value.reset();
  const std::string without = train_summary_text(s, ranks);
  EXPECT_NE(without.find("no checkpoint (give `checkpoint_dir` DIR to keep the progress)"), std::string::npos) << without;
  EXPECT_NE(without.find("noise scale not measurable (the gradient is all noise)"), std::string::npos) << without;
}

TEST(TrainTextTest, OneProcessHasNoRanksLine) { EXPECT_EQ(train_rank_text(TrainRanksSummary{}), ""); }

/// Two DDP ranks, rank 0 waiting `wait0` ms and rank 1 `wait1` ms of each 100 ms step.
TrainRanksSummary two_ranks(double wait0, double wait1, const std::string& shares_by) {
  TrainRanksSummary r;
  r.world_size = 2;
  r.parallel = "ddp";
  r.backend = "gloo";
  r.step_ms = 100;
  r.shares_by = shares_by;
  r.ranks = {RankTraining{0, 48 << 20, 855, 2, 1024, 16000, wait0}, RankTraining{1, 20 << 20, 855, 2, 1024, 9900, wait1}};
  return r;
}

TEST(TrainTextTest, ARankTheOthersWaitForOverATenthOfTheStepIsNamedTheStragglerWithTheWayOut) {
  const TrainRanksSummary slow1 = two_ranks(39.4, 0.3, "equal");
  EXPECT_EQ(slow1.straggler(), 1);  // rank 0 waits for it
  const std::string text = train_rank_text(slow1);
  EXPECT_NE(text.find("rank 0      share 1024 of 2048 = micro 855 x 2, budget 48.0 MiB, 16000 samples/s, waits 39.40 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("straggler   rank 1: another rank waits 39.4 ms of each 100.0 ms step for it; `shares` auto"),
            std::string::npos)
      << text;
  nlohmann::json j;
  slow1.add_to_json(j);
  EXPECT_EQ(j["straggler"]["rank"].get<int>(), 1);
  EXPECT_EQ(j["ranks"][1]["share"].get<int64_t>(), 1024);
  // balanced (every wait under a tenth of the step): no straggler, no line
  const TrainRanksSummary balanced = two_ranks(2.0, 6.5, "speed");
  EXPECT_EQ(balanced.straggler(), -1);
  EXPECT_EQ(train_rank_text(balanced).find("straggler"), std::string::npos);
  nlohmann::json k;
  balanced.add_to_json(k);
  EXPECT_FALSE(k.contains("straggler"));
  // shares chosen by speed and still a straggler: the speeds moved since they were measured
  EXPECT_NE(train_rank_text(two_ranks(0.5, 30, "speed")).find("straggler   rank 0: another rank waits 30.0 ms"),
            std::string::npos);
}

TEST(TrainTextTest, TheMonitorsVerdictOfARankWaitingForTheStragglerBlamesTheWaitNotTheNetwork) {
  TrainRanksSummary slow1 = two_ranks(39.4, 0.3, "equal");
  slow1.last_rank_allreduce_ms = 1.5;
  BottleneckFinding waiting;
  waiting.verdict = "communication-bound";
  waiting.reason = "41 % of the step is all-reduce (threshold 30 %)";
  waiting.fix = "more bandwidth";
  note_straggler(waiting, slow1, 0);
  EXPECT_EQ(waiting.verdict, "communication-bound");
  EXPECT_NE(waiting.reason.find("39.4 ms of each 100.0 ms step (39 %) is waiting for rank 1, the straggler"),
            std::string::npos)
      << waiting.reason;
  EXPECT_NE(waiting.fix.find("mostly waiting for rank 1 (the last rank to arrive all-reduces in 1.50 ms), not the "
                             "network: `shares` auto"),
            std::string::npos)
      << waiting.fix;
  EXPECT_EQ(waiting.evidence["straggler"]["rank"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(waiting.evidence["straggler"]["wait_share"].get<double>(), 0.394);
  // the straggler's own verdict (its compute) keeps its fix and hears who waits for it
  BottleneckFinding slow;
  slow.verdict = "compute-bound";
  slow.reason = "80 % of the step is compute";
  slow.fix = "a faster device";
  note_straggler(slow, slow1, 1);
  EXPECT_NE(slow.reason.find("this rank is the straggler: another waits 39.4 ms of each 100.0 ms step for it"),
            std::string::npos)
      << slow.reason;
  EXPECT_EQ(slow.fix.rfind("a faster device; or give this rank less of the global batch: `shares` auto", 0), 0u)
      << slow.fix;
  // no straggler: the verdict is left as it was
  BottleneckFinding balanced = waiting;
  const BottleneckFinding before = balanced;
  note_straggler(balanced, two_ranks(2.0, 6.5, "speed"), 0);
  EXPECT_EQ(balanced.reason, before.reason);
  EXPECT_EQ(balanced.fix, before.fix);
}

TEST(TrainTextTest, EveryNumberTheSummaryShowsIsInTheJson) {
  const TrainSummary s = one_process_summary();
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j["steps"], 120);
  EXPECT_EQ(j["global_batch"], 64);
  EXPECT_DOUBLE_EQ(j["final_val_accuracy"].get<double>(), 0.7813);
  EXPECT_TRUE(j["final_test_accuracy"].is_null());  // the split's results under its own name
  EXPECT_EQ(j["resumed_from"], 40);
  EXPECT_EQ(j["oom_backoffs"].size(), 1u);
  nlohmann::json ranks;
  TrainRanksSummary{}.add_to_json(ranks);
  EXPECT_EQ(ranks["backend"], "none");
  EXPECT_TRUE(ranks["allreduce_overlap_fraction"].is_null());
}

}  // namespace
}  // namespace saturate

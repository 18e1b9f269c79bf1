// train --adaptive: the batch follows goodput as the noise scale moves, a run that grows its batch
// resumes bit for bit, evaluations every N samples record the training time, and a run stops
// at the accuracy asked for.
#include "saturate/train/adaptive_batch.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/search/goodput.h"
#include "saturate/train/trainer.h"
#include "support/fashion.h"
#include "support/support.h"

using namespace saturate;
using saturate::testing::fashion_pool;

namespace {

/// samples/s = 1000 b / (5 + 0.05 b) at 1, 2, 4, ..., 512: launch-bound small batches.
ThroughputCurve law_curve(int64_t max_batch = 512) {
  ThroughputCurve c;
  for (int64_t b = 1; b <= max_batch; b *= 2) {
    ThroughputPoint p;
    p.batch = b;
    p.ok = true;
    p.samples_per_s = 1000.0 * static_cast<double>(b) / (5 + 0.05 * static_cast<double>(b));
    c.points.push_back(p);
  }
  return c;
}

AdaptiveBatchOptions options(int64_t unit = 32, int64_t every = 10) {
  AdaptiveBatchOptions o;
  o.unit = unit;
  o.max_units = 16;
  o.max_micro_batch = 512;
  o.every = every;
  o.curve = law_curve();
  return o;
}

TEST(AdaptiveBatch, GrowsWhenTheNoiseScaleGrowsAndOnlyAtItsDecisionSteps) {
  AdaptiveBatch a(options());
  EXPECT_EQ(a.global_batch(), 32);
  EXPECT_FALSE(a.after_step(4, 1e6));  // not a decision step
  EXPECT_EQ(a.units(), 1);
  EXPECT_FALSE(a.after_step(9, std::nullopt));  // no noise scale yet: no decision
  // a small noise scale: every extra sample is mostly wasted, stay at the base batch
  EXPECT_FALSE(a.after_step(9, 2.0));
  EXPECT_EQ(a.units(), 1);
  // a noise scale far above the batch: grow, to where goodput peaks
  EXPECT_TRUE(a.after_step(19, 5000.0));
  EXPECT_GT(a.units(), 1);
  for (int64_t u = 1; u <= 16; u *= 2) EXPECT_GE(a.goodput(a.units(), 5000.0), a.goodput(u, 5000.0)) << u;
  ASSERT_EQ(a.changes().size(), 1u);
  EXPECT_EQ(a.changes()[0].step, 20);
  EXPECT_EQ(a.changes()[0].old_units, 1);
  EXPECT_GT(a.changes()[0].goodput_gain, 1.05);
  // AdaScale: nearly linear while the batch is far below the noise scale
  EXPECT_GT(a.lr_gain(), 0.8 * static_cast<double>(a.units()));
  EXPECT_LE(a.lr_gain(), static_cast<double>(a.units()) + 1e-9);
  EXPECT_EQ(a.micro_batch(), std::min<int64_t>(a.rank_batch(), 512));
}

TEST(AdaptiveBatch, KeepsItsBatchWhenAnotherPromisesLessThanTheMinimumGain) {
  AdaptiveBatchOptions o = options();
  o.min_gain = 1e6;  // nothing is ever that much better
  AdaptiveBatch a(o);
  EXPECT_FALSE(a.after_step(9, 5000.0));
  EXPECT_EQ(a.units(), 1);
  EXPECT_TRUE(a.changes().empty());
}

TEST(AdaptiveBatch, BeyondTheLargestMicroBatchAccumulatesAndAnOomLowersIt) {
  AdaptiveBatchOptions o = options(256);
  o.max_micro_batch = 256;
  AdaptiveBatch a(o);
  // nearly all noise: samples/s decides, and past the largest micro-batch accumulation adds samples
  // per step, not samples per second: no reason to grow
  EXPECT_FALSE(a.after_step(9, 1e9));
  EXPECT_EQ(a.units(), 1);
  EXPECT_NEAR(a.lr_gain(), 1.0, 1e-6);
  a.lower_max_micro_batch(100);
  EXPECT_EQ(a.micro_batch(), 100);
  AdaptiveBatch b(options(256));
  b.load_state(a.state());
  EXPECT_EQ(b.micro_batch(), 100);  // min(rank batch 256, 100)
  EXPECT_EQ(b.state(), a.state());
  // another base batch: the data position (in base batches) would point at other samples
  AdaptiveBatch c(options(32));
  ASSERT_THROWS_WITH(c.load_state(a.state()), UsageError, "resume with `base_batch` 256");
}

TEST(AdaptiveBatch, ASlowAllReduceEveryStepMakesALargerBatchPerAllReduceWin) {
  // the same curve and noise scale: on one process (or a fast network) the batch stays where the
  // curve's samples/s flattens; 2 s of all-reduce a step makes every step's samples count more
  AdaptiveBatchOptions fast = options(32, 10), slow = options(32, 10);
  fast.max_micro_batch = slow.max_micro_batch = 64;  // beyond 64 a rank accumulates: no faster
  slow.step_comm_ms = 2000;
  AdaptiveBatch a(fast), b(slow);
  a.after_step(9, 300.0);
  b.after_step(9, 300.0);
  EXPECT_GT(b.units(), a.units());
  // what the all-reduce costs: a step of R samples takes R / (samples/s) + 2 s, so the
  // goodput's samples/s at the chosen batch is far below the curve's
  EXPECT_LT(b.goodput(b.units(), 300.0), 0.5 * a.goodput(b.units(), 300.0));
  // a negative time is refused
  AdaptiveBatchOptions bad = options();
  bad.step_comm_ms = -1;
  ASSERT_THROWS_WITH(AdaptiveBatch{bad}, UsageError, "-1 is not a time in ms");
}

/// Rank `rank` of two ranks taking 48 and 16 of every 64-sample unit; rank 1's steps run at
/// `slow` times rank 0's samples/s, and its largest micro-batch is 64.
AdaptiveBatchOptions unequal(int rank, double slow) {
  AdaptiveBatchOptions o = options(rank == 0 ? 48 : 16, 10);
  o.world_size = 2;
  o.max_units = 64;
  ThroughputCurve slower = law_curve();
  for (ThroughputPoint& p : slower.points) p.samples_per_s *= slow;
  o.ranks = {AdaptiveRank{48, 512, law_curve()}, AdaptiveRank{16, 64, slower}};
  o.rank = rank;
  o.max_micro_batch = o.ranks[static_cast<size_t>(rank)].max_micro_batch;
  o.curve = o.ranks[static_cast<size_t>(rank)].curve;
  return o;
}

TEST(AdaptiveBatch, WithUnequalSharesEveryRankDecidesTheSameBatchOnTheSlowestRanksTime) {
  AdaptiveBatch r0(unequal(0, 0.5)), r1(unequal(1, 0.5));
  EXPECT_EQ(r0.global_batch(), 64);  // the shares add up to the base batch
  EXPECT_EQ(r1.global_batch(), 64);
  EXPECT_EQ(r0.rank_batch(), 48);
  EXPECT_EQ(r1.rank_batch(), 16);
  for (int64_t u = 1; u <= 64; u *= 2) EXPECT_DOUBLE_EQ(r0.goodput(u, 5000.0), r1.goodput(u, 5000.0)) << u;
  ASSERT_TRUE(r0.after_step(9, 5000.0));
  ASSERT_TRUE(r1.after_step(9, 5000.0));
  EXPECT_EQ(r0.units(), r1.units());
  EXPECT_EQ(r0.rank_batch(), 48 * r0.units());
  EXPECT_EQ(r1.rank_batch(), 16 * r1.units());
  EXPECT_EQ(r1.micro_batch(), std::min<int64_t>(16 * r1.units(), 64));
  // the step waits for the slowest rank: with rank 1 at a hundredth of rank 0's speed the job's
  // samples/s (all noise: efficiency 1) is what rank 1 manages on its 16 of every 64, not more
  AdaptiveBatch crawl(unequal(0, 0.01));
  for (int64_t u = 1; u <= 64; u *= 2) {
    const int64_t micro1 = std::min<int64_t>(16 * u, 64);
    const double rank1_alone = 0.01 * 1000.0 * static_cast<double>(micro1) / (5 + 0.05 * static_cast<double>(micro1));
    EXPECT_LE(crawl.goodput(u, 1e12), 4 * rank1_alone * (1 + 1e-9)) << u;
    EXPECT_LT(crawl.goodput(u, 1e12), r0.goodput(u, 1e12)) << u;
  }
  // an OOM back-off: each rank halves its own micro-batch, and lowers the other's alike, so the
  // next decisions still agree
  const int64_t m0 = r0.micro_batch(), m1 = r1.micro_batch();
  r0.lower_max_micro_batch((m0 + 1) / 2);
  r1.lower_max_micro_batch((m1 + 1) / 2);
  EXPECT_EQ(r1.micro_batch(), (m1 + 1) / 2);
  for (int64_t u = 1; u <= 64; u *= 2) EXPECT_DOUBLE_EQ(r0.goodput(u, 800.0), r1.goodput(u, 800.0)) << u;
  r0.after_step(19, 800.0);
  r1.after_step(19, 800.0);
  EXPECT_EQ(r0.units(), r1.units());
  // a resume: the base batch is the shares' sum; each rank keeps the largest micro-batch its own
  // search found (the saved one is rank 0's)
  AdaptiveBatch again(unequal(1, 0.5));
  again.load_state(r0.state());
  EXPECT_EQ(again.units(), r0.units());
  EXPECT_EQ(again.micro_batch(), std::min<int64_t>(16 * r0.units(), 64));
}

TEST(AdaptiveBatch, RefusesOptionsItCannotWorkWith) {
  AdaptiveBatchOptions o = options();
  o.unit = 0;
  EXPECT_THROW(AdaptiveBatch{o}, UsageError);
  o = options();
  o.every = 0;
  EXPECT_THROW(AdaptiveBatch{o}, UsageError);
  o = options();
  o.curve.points.clear();
  EXPECT_THROW(AdaptiveBatch{o}, UsageError);
  o = options();
  o.min_gain = 0.5;
  EXPECT_THROW(AdaptiveBatch{o}, UsageError);
  AdaptiveBatch a(options());
  EXPECT_THROW(a.load_state({1.0, 1.0}), UsageError);
}

// ---- in the Trainer, on Fashion-MNIST ----

class TensorEval final : public EvalData {
 public:
  TensorEval(torch::Tensor x, torch::Tensor y, int64_t batch) : x_(std::move(x)), y_(std::move(y)), batch_(batch) {}
  void restart() override { at_ = 0; }
  std::optional<Batch> next() override {
    if (at_ >= x_.size(0)) return std::nullopt;
    const int64_t end = std::min(at_ + batch_, x_.size(0));
    Batch b{x_.slice(0, at_, end), y_.slice(0, at_, end)};
    at_ = end;
    return b;
  }

 private:
  torch::Tensor x_, y_;
  int64_t batch_, at_ = 0;
};

struct FashionRig {
  FashionRig() {
    ModelSpec s;
    s.name = "mlp";
    s.width = 64;
    s.layers = 2;
    s.input_shape = {1, 28, 28};
    s.classes = 10;
    s.seed = 5;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kAdam, 0.002);
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
};

struct AdaptiveRun {
  TrainResult result;
  std::vector<AdaptiveChange> changes;
  std::vector<torch::Tensor> params;
};

AdaptiveRun run_adaptive(const saturate::testing::TensorPool& pool, TrainOptions o, int64_t unit = 16) {
  FashionRig rig;
  TensorTrainData data(pool.inputs, pool.targets, unit);
  GradientNoiseScale noise;
  AdaptiveBatchOptions ao = options(unit, 10);
  ao.max_units = 32;
  AdaptiveBatch adaptive(ao);
  o.micro_batch = unit;
  o.noise = &noise;
  o.adaptive = &adaptive;
  Trainer t(*rig.workload, *rig.meter, data, nullptr, o);
  AdaptiveRun r;
  r.result = t.run();
  r.changes = adaptive.changes();
  for (auto& p : rig.workload->model().parameters()) r.params.push_back(p.detach().clone());
  return r;
}

TEST(AdaptiveTraining, GrowsTheBatchAsTheNoiseScaleRisesAndCountsEverySample) {
  const auto pool = fashion_pool(8192);
  TrainOptions o;
  o.max_steps = 60;
  o.schedule.peak_lr = 0.002;
  const AdaptiveRun r = run_adaptive(pool, o);
  ASSERT_FALSE(r.changes.empty()) << "the batch never changed";
  EXPECT_GT(r.result.global_batch, 16);
  // the samples seen follow from the change log: each segment's steps x its batch
  int64_t samples = 0, step = 0, units = 1;
  for (const auto& c : r.changes) {
    EXPECT_EQ(c.old_units, units);
    EXPECT_EQ(c.step % 10, 0) << "changes happen at decision steps";
    samples += (c.step - step) * units * 16;
    step = c.step;
    units = c.new_units;
  }
  samples += (60 - step) * units * 16;
  EXPECT_EQ(r.result.samples_seen, samples);
  EXPECT_EQ(r.result.global_batch, units * 16);
  EXPECT_EQ(r.result.steps, 60);
}

TEST(AdaptiveTraining, AResumedRunThatGrewItsBatchContinuesBitForBit) {
  const auto pool = fashion_pool(8192);
  const std::string dir = saturate::testing::temp_dir("adaptive_resume");
  TrainOptions o;
  o.max_steps = 60;
  o.schedule.peak_lr = 0.002;
  const AdaptiveRun whole = run_adaptive(pool, o);
  ASSERT_FALSE(whole.changes.empty());
  const int64_t stop = whole.changes.front().step + 5;  // after the first change, mid-way
  ASSERT_LT(stop, 60);
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  TrainOptions part = o;
  part.max_steps = stop;
  (void)run_adaptive(pool, part);
  TrainOptions rest = o;
  rest.resume = true;
  const AdaptiveRun resumed = run_adaptive(pool, rest);
  ASSERT_EQ(resumed.result.resumed_from.value_or(-1), stop);
  ASSERT_EQ(resumed.result.losses.size(), whole.result.losses.size());
  for (size_t i = 0; i < whole.result.losses.size(); ++i)
    EXPECT_EQ(resumed.result.losses[i], whole.result.losses[i]) << "step " << i;
  ASSERT_EQ(resumed.changes.size(), whole.changes.size());
  for (size_t i = 0; i < whole.changes.size(); ++i) {
    EXPECT_EQ(resumed.changes[i].step, whole.changes[i].step);
    EXPECT_EQ(resumed.changes[i].new_units, whole.changes[i].new_units);
  }
  EXPECT_EQ(resumed.result.samples_seen, whole.result.samples_seen);
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_TRUE(torch::equal(resumed.params[i], whole.params[i]));
  // a fixed-batch run cannot continue an adaptive checkpoint (nor the other way round)
  FashionRig rig;
  TensorTrainData data(pool.inputs, pool.targets, 16);
  TrainOptions fixed = rest;
  fixed.micro_batch = 16;
  Trainer t(*rig.workload, *rig.meter, data, nullptr, fixed);
  ASSERT_THROWS_WITH(t.run(), UsageError, "`adaptive`");
}

TEST(AdaptiveTraining, EvaluatesEveryNSamplesWithTheTrainingTimeAndStopsAtTheAccuracyAskedFor) {
  const auto pool = fashion_pool(8192);
  const auto test = fashion_pool(1000, "test");
  FashionRig rig;
  TensorTrainData data(pool.inputs, pool.targets, 32);
  TensorEval eval(test.inputs, test.targets, 500);
  TrainOptions o;
  o.micro_batch = 32;
  o.epochs = 3;
  o.schedule.peak_lr = 0.002;
  o.eval_every_samples = 1000;
  o.stop_at_accuracy = 0.7;
  Trainer t(*rig.workload, *rig.meter, data, &eval, o);
  const TrainResult r = t.run();
  ASSERT_FALSE(r.evals.empty());
  EXPECT_TRUE(r.reached_accuracy);
  EXPECT_GE(r.evals.back().accuracy, 0.7);
  for (size_t i = 0; i + 1 < r.evals.size(); ++i) EXPECT_LT(r.evals[i].accuracy, 0.7) << "it went on past the target";
  for (size_t i = 0; i < r.evals.size(); ++i) {
    // one evaluation each time the samples cross a multiple of 1000 (32-sample steps: never two at once)
    EXPECT_EQ(r.evals[i].samples / 1000, static_cast<int64_t>(i + 1)) << i;
    EXPECT_EQ(r.evals[i].samples, r.evals[i].step * 32);
    if (i > 0) {
      EXPECT_GT(r.evals[i].train_seconds, r.evals[i - 1].train_seconds);
    }
  }
  EXPECT_EQ(r.steps, r.evals.back().step);
  EXPECT_LT(r.epochs, 3.0);
}

}  // namespace

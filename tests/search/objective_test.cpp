// The objective (search/objective.h) against a fake runner whose samples/s follow a known law,
// and a noise measure with a known noise scale: the knee is where a brute-force scan of the law
// puts it, goodput asks for the noise scale once at the base batch, memory times nothing, and
// every option out of range is refused by name before anything runs.
#include "saturate/search/objective.h"

#include <cmath>

#include "saturate/core/errors.h"
#include "search/fake_runner.h"
#include "support/support.h"

using namespace saturate;
using saturate::testing::FakeLaw;
using saturate::testing::FakeRunner;

namespace {

double law_samples_per_s(const FakeLaw& law, int64_t b) {
  return 1000.0 * static_cast<double>(b) / (law.launch_ms + law.per_sample_ms * static_cast<double>(b));
}

}  // namespace

TEST(Objective, ThroughputPicksTheSmallestTimedBatchWithinTheKneeOfTheBest) {
  FakeLaw law;
  law.launch_ms = 20;
  law.per_sample_ms = 0.1;
  FakeRunner runner(law);
  ObjectiveOptions o;
  o.objective = Objective::kThroughput;
  o.knee_fraction = 0.8;
  const ObjectiveOutcome out = pick_by_objective(runner, o, 1024, {}, "");
  // brute force over the batches the curve times (powers of two and the max)
  double best = 0;
  for (int64_t b : curve_batches(1, 1024, 1)) best = std::max(best, law_samples_per_s(law, b));
  int64_t expected = 0;
  for (int64_t b : curve_batches(1, 1024, 1))
    if (law_samples_per_s(law, b) >= 0.8 * best) {
      expected = b;
      break;
    }
  EXPECT_EQ(out.batch, expected);
  ASSERT_TRUE(out.curve.has_value());
  EXPECT_FALSE(out.noise.has_value());
  EXPECT_NE(out.reason.find("within 80 %"), std::string::npos) << out.reason;
  EXPECT_EQ(to_json(out)["throughput_curve"]["knee_batch"], expected);
}

TEST(Objective, MemoryTimesNothingAndKeepsTheBatchItWasGiven) {
  FakeRunner runner(FakeLaw{});
  const ObjectiveOutcome out = pick_by_objective(runner, ObjectiveOptions{}, 300, {}, "");
  EXPECT_EQ(out.batch, 300);
  EXPECT_EQ(runner.calls, 0);
  EXPECT_FALSE(out.curve.has_value());
}

TEST(Objective, GoodputMeasuresTheNoiseScaleOnceAtTheBaseBatchAndUsesIt) {
  FakeLaw law;
  law.launch_ms = 5;
  law.per_sample_ms = 0.01;  // samples/s still grow at 1024: memory would take the largest
  FakeRunner runner(law);
  ObjectiveOptions o;
  o.objective = Objective::kGoodput;
  o.base_batch = 16;
  o.noise_steps = 7;
  int calls = 0;
  const auto noise = [&](int64_t batch, int steps) {
    ++calls;
    EXPECT_EQ(batch, 16);
    EXPECT_EQ(steps, 7);
    NoiseScaleMeasurement m;
    m.noise_scale = 50.0;  // a small noise scale: large batches waste samples
    m.batch = batch;
    m.steps = steps;
    return m;
  };
  const ObjectiveOutcome out = pick_by_objective(runner, o, 1024, noise, "fake data");
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(out.goodput.has_value());
  EXPECT_EQ(out.batch, out.goodput->batch);
  EXPECT_LT(out.batch, 1024) << "a noise scale of 50 makes 1024 samples per step mostly wasted";
  // brute force over the timed batches from the base batch up: the law's samples/s times Pollux's
  // published efficiency (phi + M0) / (phi + M) (Qiao et al., OSDI '21), its largest product
  int64_t expected = 0;
  double best = 0;
  for (int64_t b : curve_batches(1, 1024, 1)) {
    if (b < 16) continue;
    const double goodput = law_samples_per_s(law, b) * (50.0 + 16.0) / (50.0 + static_cast<double>(b));
    if (goodput > best) {
      best = goodput;
      expected = b;
    }
  }
  EXPECT_EQ(out.batch, expected);
  EXPECT_EQ(to_json(out)["noise_scale"]["data"], "fake data");
}

TEST(Objective, EveryOptionOutOfRangeIsRefusedByNameBeforeAnyTrial) {
  FakeRunner runner(FakeLaw{});
  const std::vector<std::pair<std::string, ObjectiveOptions>> bad = {
      {"knee_fraction", [] { ObjectiveOptions o; o.knee_fraction = 0; return o; }()},
      {"knee_fraction", [] { ObjectiveOptions o; o.knee_fraction = 1.5; return o; }()},
      {"noise_steps", [] { ObjectiveOptions o; o.noise_steps = 0; return o; }()},
      {"noise_steps", [] { ObjectiveOptions o; o.noise_steps = 10001; return o; }()},
      {"base_batch", [] { ObjectiveOptions o; o.base_batch = -1; return o; }()}};
  for (auto [option, o] : bad) {
    o.objective = Objective::kThroughput;
    try {
      pick_by_objective(runner, o, 64, {}, "");
      ADD_FAILURE() << option << " out of range was accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(e.option(), option);
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << "names no flag: " << e.what();
    }
  }
  EXPECT_EQ(runner.calls, 0);
}

TEST(Objective, NoiseScaleFromAStepsOwnGradientNormsIsTheRatioTheNormsImply) {
  // |G_b|^2 = |G|^2 + tr(S)/b exactly: the estimate must be tr(S)/|G|^2 = 2.5 / 0.01 = 250
  const double g2 = 0.01, trace = 2.5;
  int calls = 0;
  const auto measure = [&](int64_t batch) {
    ++calls;
    GradientNormPair p;
    p.small_batch = batch / 2;
    p.big_batch = batch;
    p.small_sq_norm = g2 + trace / static_cast<double>(p.small_batch);
    p.big_sq_norm = g2 + trace / static_cast<double>(p.big_batch);
    return p;
  };
  const NoiseScaleMeasurement m = measure_noise_scale(measure, 32, 5);
  EXPECT_EQ(calls, 5);
  ASSERT_TRUE(m.noise_scale.has_value());
  EXPECT_NEAR(*m.noise_scale, trace / g2, 1e-6 * trace / g2);
  EXPECT_EQ(m.batch, 32);
  EXPECT_EQ(m.micro_batch, 16);
  EXPECT_THROW(measure_noise_scale(measure, 1, 5), UsageError);
  EXPECT_THROW(measure_noise_scale(measure, 32, 0), UsageError);
}

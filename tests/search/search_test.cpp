#include "saturate/search/search.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "search/fake_runner.h"
#include "support/support.h"

using namespace saturate;
using saturate::testing::FakeLaw;
using saturate::testing::FakeRunner;

namespace {

SearchResult search(FakeRunner& runner, Strategy s, double target = 0.9, int64_t cap = 0) {
  SearchOptions opt;
  opt.strategy = s;
  opt.target_fraction = target;
  opt.max_batch = cap;
  return search_batch_size(runner, opt);
}

const Trial* find_trial(const SearchResult& r, int64_t batch, TrialStatus status) {
  for (const Trial& t : r.trials)
    if (t.batch == batch && t.status == status) return &t;
  return nullptr;
}

/// The trials as "batch:status ..." for a failure's trace.
std::string trial_sequence(const SearchResult& r) {
  std::string seq;
  for (const Trial& t : r.trials) seq += std::to_string(t.batch) + ":" + to_string(t.status) + " ";
  return seq;
}

/// How many trials ran until the one at max_batch + 1 (the one that made the max exact).
int64_t trials_to_exact_max(const SearchResult& r) {
  const auto plus_one = std::find_if(r.trials.begin(), r.trials.end(),
                                     [&](const Trial& t) { return t.batch == r.max_batch + 1; });
  return plus_one - r.trials.begin() + 1;
}

/// Laws like the ones real models show: linear on CPU; rounded, sub-granularity steps on CUDA.
std::vector<FakeLaw> laws() {
  std::vector<FakeLaw> out;
  out.push_back({});                                                                  // ~3100
  out.push_back({200 << 20, 300 << 10, 2 << 20, 100 << 10, int64_t{8} << 30});         // CUDA-like, ~27000
  out.push_back({1 << 20, 30 << 20, 0, 5 << 20, int64_t{2} << 30});                   // big samples, ~68
  out.push_back({int64_t{3} << 30, 7 << 20, 2 << 20, 1 << 20, int64_t{80} << 30});    // a100-like, ~11000
  out.push_back({50 << 20, 10 << 10, 512, 3 << 10, 1 << 30});                         // tiny samples, ~100000
  FakeLaw convex;                                                                     // slope +8 % at the top
  convex.per_sample_bytes = 20 << 10;
  convex.quadratic_bytes = 0.09;
  convex.budget_bytes = 256 << 20;
  out.push_back(convex);
  return out;
}

}  // namespace

TEST(SearchTest, FitStrategyFindsExactMaxWithFewTrialSteps) {
  for (const FakeLaw& law : laws()) {
    FakeRunner fit_runner(law), bin_runner(law);
    const int64_t truth = fit_runner.true_max(law.budget_bytes);
    const SearchResult fit = search(fit_runner, Strategy::kFit);
    const SearchResult bin = search(bin_runner, Strategy::kBinsearch);
    SCOPED_TRACE("true max " + std::to_string(truth));
    SCOPED_TRACE(trial_sequence(fit));
    EXPECT_EQ(fit.max_batch, truth);
    EXPECT_TRUE(fit.max_batch_exact);
    EXPECT_EQ(bin.max_batch, truth);
    EXPECT_TRUE(bin.max_batch_exact);
    // at most a third of binsearch's steps on linear laws with a large max; tiny maxima,
    // rounding coarser than a sample, or curved memory (the law overshoots from below) leave
    // less to save: half.
    const int64_t factor =
        (truth < 1000 || law.granularity_bytes > law.per_sample_bytes || law.quadratic_bytes > 0) ? 2 : 3;
    EXPECT_LE(fit.trial_steps * factor, bin.trial_steps) << "fit " << fit.trial_steps << " vs binsearch " << bin.trial_steps;
    // every answer is backed by trials that ran: max fits, max+1 does not.
    EXPECT_NE(find_trial(fit, truth, TrialStatus::kOk), nullptr);
    EXPECT_NE(find_trial(fit, truth + 1, TrialStatus::kOom), nullptr);
  }
}

TEST(SearchTest, OnMemoryThatGrowsLinearlyFitFindsTheExactMaxAndRecommendedBatchInAtMostSevenTrials) {
  // issue 26: the floor is two probes for the law, the predicted max and max + 1; a third probe
  // lengthens the law's baseline when the first two span little of the budget, or (under half
  // of it) lands where the law puts the recommended batch. The recommended batch adds one or two
  // (it and one more, under the lowered budget). Laws with fixed costs larger and smaller than
  // the per-sample part, no noise, no rounding. (Before: 7-9 trials on the zoo.)
  std::vector<FakeLaw> linear(3);
  linear[1].fixed_bytes = int64_t{1} << 30;  // fixed costs are most of the first probe's bytes
  linear[2].per_sample_bytes = 40 << 20;     // few large samples
  for (const FakeLaw& law : linear) {
    FakeRunner runner(law);
    const SearchResult r = search(runner, Strategy::kFit);
    SCOPED_TRACE(trial_sequence(r));
    ASSERT_EQ(r.max_batch, runner.true_max(law.budget_bytes));
    ASSERT_TRUE(r.max_batch_exact && r.recommended_exact);
    EXPECT_LE(trials_to_exact_max(r), 6) << "trials to the exact max";
    EXPECT_LE(r.trials.size(), 7u);
  }
}

TEST(SearchTest, FitStrategyFindsTheExactRecommendedBatchForTheTarget) {
  for (const FakeLaw& law : laws()) {
    for (double target : {0.8, 0.9}) {
      FakeRunner runner(law);
      const SearchResult r = search(runner, Strategy::kFit, target);
      const int64_t target_bytes = static_cast<int64_t>(target * static_cast<double>(law.budget_bytes));
      EXPECT_EQ(r.recommended_batch, runner.true_max(target_bytes));
      EXPECT_TRUE(r.recommended_exact);
      bool backed = false;
      for (const Trial& t : r.trials)
        backed |= t.batch == r.recommended_batch && t.ok() && t.peak_reserved_bytes <= target_bytes;
      EXPECT_TRUE(backed) << "no trial measured the recommended batch within the target";
    }
  }
}

TEST(SearchTest, PowerStrategyStopsAtAPowerOfTwoBelowTheMax) {
  FakeRunner runner(FakeLaw{});
  const int64_t truth = runner.true_max(FakeLaw{}.budget_bytes);
  const SearchResult r = search(runner, Strategy::kPower);
  EXPECT_LE(r.max_batch, truth);
  EXPECT_GT(r.max_batch * 2, truth);
  EXPECT_EQ(r.max_batch & (r.max_batch - 1), 0) << r.max_batch << " is not a power of two";
  EXPECT_FALSE(r.max_batch_exact);
}

TEST(SearchTest, CapStopsEveryStrategyAtMaxBatch) {
  for (Strategy s : {Strategy::kFit, Strategy::kBinsearch, Strategy::kPower}) {
    FakeRunner runner(FakeLaw{});
    const SearchResult r = search(runner, s, 0.9, 100);
    EXPECT_EQ(r.max_batch, 100) << to_string(s);
    EXPECT_TRUE(r.capped) << to_string(s);
    for (const Trial& t : r.trials) EXPECT_LE(t.batch, 100);
  }
}

TEST(SearchTest, TheDivisorsStrategyFindsTheLargestDivisorThatFitsInFewerTrialsThanStepsOfNinetyPercent) {
  // issue 29: a micro-batch that must split an effective batch into whole accumulation steps
  // (Hugging Face Trainer's). The oracle scans the divisors with the law itself; the baseline is
  // Accelerate's find_executable_batch_size from the same first batch (x0.9 after each OOM).
  for (const FakeLaw& law : laws()) {
    FakeRunner oracle(law);
    const int64_t truth = oracle.true_max(law.budget_bytes);
    for (int64_t total : {truth + 1, 2 * truth, 360 * (truth / 360 + 1), truth / 2 + 1, int64_t{1} << 20}) {
      int64_t expected = 0, next = 0;  // the largest divisor that fits, the next one above it
      for (int64_t d = 1; d <= total; ++d) {
        if (total % d) continue;
        if (oracle.peak_bytes(d) <= law.budget_bytes) expected = d;
        else if (!next) next = d;
      }
      for (int64_t start : {total, std::max<int64_t>(1, truth / 3), int64_t{1}}) {
        FakeRunner runner(law);
        SearchOptions opt;
        opt.strategy = Strategy::kDivisors;
        opt.max_batch = total;
        opt.start_batch = start;
        const SearchResult r = search_batch_size(runner, opt);
        SCOPED_TRACE(fmt::format("truth {} total {} start {}: {}", truth, total, start, trial_sequence(r)));
        EXPECT_EQ(r.max_batch, expected);
        EXPECT_NE(find_trial(r, expected, TrialStatus::kOk), nullptr);
        if (next) {
          EXPECT_NE(find_trial(r, next, TrialStatus::kOom), nullptr) << "the next divisor was run";
        }
        EXPECT_EQ(r.capped, expected == total);
        for (const Trial& t : r.trials) EXPECT_EQ(total % t.batch, 0) << t.batch << " does not divide " << total;
        if (start != total || expected == total) continue;
        int64_t accelerate = 1;  // from the total down by 0.9 until one fits
        for (auto b = static_cast<double>(total); oracle.peak_bytes(static_cast<int64_t>(b)) > law.budget_bytes;
             b *= 0.9)
          ++accelerate;
        EXPECT_LE(static_cast<int64_t>(r.trials.size()), accelerate);
        if (accelerate > 2) {
          EXPECT_LT(static_cast<int64_t>(r.trials.size()), accelerate);
        }
      }
    }
  }
}

TEST(SearchTest, BatchOneNotFittingGivesZero) {
  FakeLaw law;
  law.fixed_bytes = law.budget_bytes - (law.per_sample_bytes / 2);
  for (Strategy s : {Strategy::kFit, Strategy::kBinsearch, Strategy::kPower, Strategy::kDivisors}) {
    FakeRunner runner(law);
    const SearchResult r = search(runner, s, 0.9, s == Strategy::kDivisors ? 64 : 0);
    EXPECT_EQ(r.max_batch, 0) << to_string(s);
    EXPECT_EQ(r.recommended_batch, 0);
    EXPECT_NE(find_trial(r, 1, TrialStatus::kOom), nullptr) << to_string(s);
  }
}

TEST(SearchTest, SmallMaximaAreFoundExactly) {
  for (int64_t want : {1, 2, 3, 5, 8, 9}) {
    FakeLaw law;
    law.fixed_bytes = 10 << 20;
    law.per_sample_bytes = 100 << 20;
    law.budget_bytes = law.fixed_bytes + want * law.per_sample_bytes + (50 << 20);
    FakeRunner runner(law);
    const SearchResult r = search(runner, Strategy::kFit);
    EXPECT_EQ(r.max_batch, want);
    EXPECT_TRUE(r.max_batch_exact);
  }
}

TEST(SearchTest, ThroughputBatchIsTheSmallestWithinThreePercentOfTheBest) {
  FakeLaw law;
  law.launch_ms = 20;
  law.per_sample_ms = 0.01;
  FakeRunner runner(law);
  const SearchResult r = search(runner, Strategy::kBinsearch);
  double best = 0;  // among the batches one may train at: up to the recommended
  for (const Trial& t : r.trials)
    if (t.ok() && t.batch <= r.recommended_batch) best = std::max(best, t.samples_per_s);
  const Trial* chosen = find_trial(r, r.throughput_batch, TrialStatus::kOk);
  ASSERT_NE(chosen, nullptr);
  EXPECT_GE(chosen->samples_per_s, 0.97 * best);
  for (const Trial& t : r.trials)
    if (t.ok() && t.batch < r.throughput_batch) {
      EXPECT_LT(t.samples_per_s, 0.97 * best) << t.batch;
    }
  EXPECT_LT(r.throughput_batch, r.max_batch);  // saturation comes before the memory limit here
}

TEST(SearchTest, ThroughputBatchIsNeverAboveTheRecommendedBatchEvenWhenLargerProbesRanFaster) {
  // samples/s still grows at the boundary (a tiny per-sample time): the fastest probes are the
  // largest, above the target; the hint must stay within what the search recommends
  FakeLaw law;
  law.launch_ms = 50;
  law.per_sample_ms = 0.001;
  for (const Strategy s : {Strategy::kFit, Strategy::kBinsearch}) {
    FakeRunner runner(law);
    const SearchResult r = search(runner, s);
    ASSERT_GT(r.recommended_batch, 0);
    const auto faster_above = std::any_of(r.trials.begin(), r.trials.end(), [&](const Trial& t) {
      const Trial* rec = find_trial(r, r.recommended_batch, TrialStatus::kOk);
      return rec && t.ok() && t.batch > r.recommended_batch && t.samples_per_s > rec->samples_per_s;
    });
    EXPECT_TRUE(faster_above) << to_string(s) << ": the case needs a faster probe above the recommended batch";
    EXPECT_GT(r.throughput_batch, 0);
    EXPECT_LE(r.throughput_batch, r.recommended_batch) << to_string(s);
  }
}

TEST(SearchTest, ConfirmingAStableBoundaryCostsTwoTrialsAndChangesNothing) {
  FakeLaw law;
  law.noise_bytes = 200 << 10;
  FakeRunner plain(law), confirmed(law);
  SearchOptions o;
  const SearchResult a = search_batch_size(plain, o);
  o.confirm_runs = 1;
  const SearchResult b = search_batch_size(confirmed, o);
  EXPECT_EQ(b.max_batch, confirmed.true_max(law.budget_bytes));
  EXPECT_EQ(b.max_batch, a.max_batch);
  EXPECT_TRUE(b.boundary_confirmed);
  EXPECT_EQ(b.boundary_spread, 0);
  EXPECT_EQ(b.confirm_runs, 1);
  EXPECT_EQ(b.trials.size(), a.trials.size() + 2);  // max+1 and max once more
  EXPECT_EQ(b.recommended_batch, a.recommended_batch);
}

namespace {

/// Searches once on the unshifted law to find where the re-probes begin (the last full-budget
/// trial of max+1), then again with every trial from there on shifted: the boundary the first
/// pass found moves when it is probed again.
SearchResult search_with_later_shift(FakeLaw law, int64_t shift_bytes, Strategy strategy, FakeRunner** runner_out,
                                     std::unique_ptr<FakeRunner>& keep) {
  SearchOptions o;
  o.strategy = strategy;
  o.confirm_runs = 1;
  FakeRunner counting(law);
  const SearchResult stable = search_batch_size(counting, o);
  int reprobe = -1;
  for (size_t i = 0; i < stable.trials.size(); ++i)
    if (stable.trials[i].batch == stable.max_batch + 1 && stable.trials[i].budget_bytes == law.budget_bytes)
      reprobe = static_cast<int>(i);
  EXPECT_GT(reprobe, 0);
  law.shift_after_calls = reprobe;
  law.shift_bytes = shift_bytes;
  keep = std::make_unique<FakeRunner>(law);
  *runner_out = keep.get();
  return search_batch_size(*keep, o);
}

}  // namespace

TEST(SearchTest, ABoundaryThatDropsOnAReprobeIsNarrowedToWhatFitsEveryTime) {
  for (Strategy strategy : {Strategy::kFit, Strategy::kBinsearch}) {
    FakeLaw law;
    const int64_t shift = 5 * law.per_sample_bytes + law.per_sample_bytes / 3;  // ~1 % of the max's peak
    FakeRunner* runner = nullptr;
    std::unique_ptr<FakeRunner> keep;
    const SearchResult r = search_with_later_shift(law, shift, strategy, &runner, keep);
    const int64_t first = runner->true_max(law.budget_bytes);
    const int64_t heavier = runner->true_max(law.budget_bytes - shift);
    ASSERT_LT(heavier, first);
    EXPECT_EQ(r.max_batch, heavier) << to_string(strategy);
    EXPECT_TRUE(r.max_batch_exact) << to_string(strategy);
    EXPECT_FALSE(r.boundary_confirmed) << to_string(strategy);
    EXPECT_EQ(r.boundary_spread, first - heavier) << to_string(strategy);
  }
}

TEST(SearchTest, ABoundaryThatRisesOnAReprobeKeepsTheMaxAndReportsTheSpread) {
  FakeLaw law;
  FakeRunner* runner = nullptr;
  std::unique_ptr<FakeRunner> keep;
  const SearchResult r = search_with_later_shift(law, -2 * law.per_sample_bytes, Strategy::kFit, &runner, keep);
  const int64_t first = runner->true_max(law.budget_bytes);
  EXPECT_EQ(r.max_batch, first);  // it fit every time it was probed; max+1 fit only later
  EXPECT_FALSE(r.boundary_confirmed);
  EXPECT_EQ(r.boundary_spread, 1);  // one batch above the max was seen to fit
}

TEST(SearchTest, RejectsATargetOutsideZeroToOne) {
  FakeRunner runner(FakeLaw{});
  SearchOptions opt;
  opt.target_fraction = 1.5;
  try {
    search_batch_size(runner, opt);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.option(), "target_fraction");  // the command line names its flag, Python its keyword
    EXPECT_NE(std::string(e.what()).find("1.5 is outside 0.01..1 (a fraction of the budget"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << "the library names no flag: " << e.what();
  }
  EXPECT_EQ(runner.calls, 0) << "checked before any trial";
}

TEST(SearchTest, EveryOptionOutOfRangeIsRefusedNamingTheOption) {
  const std::vector<std::pair<std::string, std::function<void(SearchOptions&)>>> bad = {
      {"max_batch", [](SearchOptions& o) { o.max_batch = -1; }},
      {"max_batch", [](SearchOptions& o) { o.strategy = Strategy::kDivisors; }},  // no batch to divide
      {"start_batch", [](SearchOptions& o) { o.start_batch = 0; }},
      {"warmup_steps", [](SearchOptions& o) { o.warmup_steps = -1; }},
      {"measure_steps", [](SearchOptions& o) { o.measure_steps = 0; }},
      {"confirm_runs", [](SearchOptions& o) { o.confirm_runs = 11; }},
      {"max_trials", [](SearchOptions& o) { o.max_trials = 0; }},
      {"target_fraction", [](SearchOptions& o) { o.target_fraction = 0; }}};
  for (const auto& [option, spoil] : bad) {
    SearchOptions o;
    spoil(o);
    try {
      o.check();
      ADD_FAILURE() << option << " out of range was accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(e.option(), option);
    }
  }
  EXPECT_NO_THROW(SearchOptions{}.check());
}

TEST(SearchTest, StrategiesParseAndPrint) {
  for (Strategy s : {Strategy::kFit, Strategy::kBinsearch, Strategy::kPower, Strategy::kDivisors})
    EXPECT_EQ(parse_strategy(to_string(s)), s);
  ASSERT_THROWS_WITH(parse_strategy("newton"), UsageError, "expected fit, power, binsearch or divisors");
}

TEST(SearchTest, OnMemoryHiddenUnderAFixedPeakAtSmallBatchesFitReachesTheExactMaxInAtMostSixTrials) {
  // issue 42: a sharded step with checkpointing peaks at one fixed place (gathered units, gradient
  // buffers) at small batches, and its model states are most of a rank's budget: the first two
  // probes show a slope far under the real one. Measured on GPT-2 over 2 Gloo ranks (116 MiB):
  // 89.4 MiB at batch 2, 91.3 at 4, then 1.83 MiB a sample to 115.1 at 17; before, the law from 2
  // and 4 sent the search to 29, 28 and 23 (all out of memory): 9 trials to the exact max.
  struct Case {
    int64_t fixed_mib, per_sample_kib, floor_mib, budget_mib;
  };
  // (A floor that hides the growth over several doublings of the batch still costs a probe per
  // doubling until the line crosses it: 60 MiB + 1 MiB a sample under a 75 MiB floor took 8.)
  // The fourth: the first probe's peak raised by a late-freed gathered unit (Gloo), the slope from
  // the first two probes a fifth of the real one (GPT-2 in bf16: 2, 4, 40!, 22!, 13, 19!, 18!, 15, 17).
  for (const Case c : {Case{84, 1874, 89, 116}, Case{30, 4096, 60, 160}, Case{600, 8192, 640, 1024},
                       Case{84, 1024, 87, 116}, Case{74, 2662, 83, 116}}) {
    FakeLaw law;
    law.fixed_bytes = c.fixed_mib << 20;
    law.per_sample_bytes = c.per_sample_kib << 10;
    law.floor_bytes = c.floor_mib << 20;
    law.budget_bytes = c.budget_mib << 20;
    FakeRunner runner(law);
    const SearchResult r = search(runner, Strategy::kFit);
    SCOPED_TRACE(trial_sequence(r));
    ASSERT_EQ(r.max_batch, runner.true_max(law.budget_bytes));
    ASSERT_TRUE(r.max_batch_exact);
    EXPECT_EQ(r.recommended_batch, runner.true_max(static_cast<int64_t>(0.9 * static_cast<double>(law.budget_bytes))));
    EXPECT_LE(trials_to_exact_max(r), 6) << "trials to the exact max";
  }
}

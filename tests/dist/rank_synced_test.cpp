// Rank-synced search in one process: ranks are threads joined by an in-memory collective.
#include <condition_variable>
#include <mutex>
#include <thread>

#include "saturate/dist/rank_synced.h"
#include "search/fake_runner.h"
#include "support/support.h"

namespace saturate {
namespace {

/// All-reduce (max) across threads: each call waits for every rank's contribution.
class ThreadWorld {
 public:
  explicit ThreadWorld(int size) : size_(size) {}
  std::vector<int64_t> reduce(const std::vector<int64_t>& v) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t gen = generation_;
    if (arrived_ == 0) acc_ = v;
    else
      for (size_t i = 0; i < v.size(); ++i) acc_[i] = std::max(acc_[i], v[i]);
    ++calls_;
    if (++arrived_ == size_) {
      result_ = acc_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
    return result_;
  }
  int64_t calls() const { return calls_; }

 private:
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  int64_t calls_ = 0;
  std::vector<int64_t> acc_, result_;
};

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(ThreadWorld& w, int rank, int size) : w_(w), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& v) override { return w_.reduce(v); }
  std::vector<int64_t> all_gather(const std::vector<int64_t>& v) override {
    std::vector<int64_t> t(v.size() * static_cast<size_t>(size_), std::numeric_limits<int64_t>::min());
    std::copy(v.begin(), v.end(), t.begin() + static_cast<std::ptrdiff_t>(v.size() * static_cast<size_t>(rank_)));
    return w_.reduce(t);
  }

 private:
  ThreadWorld& w_;
  int rank_, size_;
};

struct RankOutcome {
  SearchResult result;
  std::vector<RankMax> maxima;
};

std::vector<RankOutcome> run_ranks(const std::vector<testing::FakeLaw>& laws, bool refine) {
  const int n = static_cast<int>(laws.size());
  ThreadWorld world(n);
  std::vector<RankOutcome> out(laws.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      testing::FakeRunner local(laws[static_cast<size_t>(r)]);
      ThreadCollectives comm(world, r, n);
      RankSyncedRunner runner(local, comm);
      SearchOptions opt;
      out[static_cast<size_t>(r)].result = search_batch_size(runner, opt);
      out[static_cast<size_t>(r)].maxima = rank_maxima(runner, opt, refine);
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(RankSyncedTest, UnequalBudgetsGiveEveryRankTheSmallestRanksExactMax) {
  testing::FakeLaw small, large;
  small.budget_bytes = int64_t{1} << 30;
  large.budget_bytes = int64_t{3} << 30;
  const int64_t small_max = testing::FakeRunner(small).true_max(small.budget_bytes);
  const int64_t large_max = testing::FakeRunner(large).true_max(large.budget_bytes);
  const auto out = run_ranks({large, small}, /*refine=*/true);
  for (const auto& o : out) {
    EXPECT_EQ(o.result.max_batch, small_max);
    EXPECT_TRUE(o.result.max_batch_exact);
    EXPECT_EQ(o.result.budget_bytes, small.budget_bytes);
    EXPECT_EQ(o.result.trials.size(), out[0].result.trials.size());
    ASSERT_EQ(o.maxima.size(), 2u);
    EXPECT_EQ(o.maxima[0].max_batch, large_max);
    EXPECT_TRUE(o.maxima[0].exact);
    EXPECT_EQ(o.maxima[0].budget_bytes, large.budget_bytes);
    EXPECT_EQ(o.maxima[1].max_batch, small_max);
    EXPECT_TRUE(o.maxima[1].exact);
  }
  EXPECT_EQ(out[0].result.recommended_batch, out[1].result.recommended_batch);
}

TEST(RankSyncedTest, WithoutRefiningALargerRankReportsWhatItSaw) {
  testing::FakeLaw small, large;
  small.budget_bytes = int64_t{1} << 30;
  large.budget_bytes = int64_t{3} << 30;
  const auto out = run_ranks({small, large}, /*refine=*/false);
  EXPECT_TRUE(out[0].maxima[0].exact);
  EXPECT_FALSE(out[0].maxima[1].exact);
  EXPECT_GE(out[0].maxima[1].max_batch, out[0].result.max_batch);
}

TEST(RankSyncedTest, AnErrorOnOneRankIsAnErrorOnAllNamingTheRank) {
  class Failing final : public TrialRunner {
   public:
    Trial run(int64_t batch, const TrialRequest&) override { throw std::runtime_error("shape mismatch"); }
    int64_t budget_bytes() const override { return int64_t{1} << 30; }
  };
  ThreadWorld world(2);
  std::vector<SearchResult> results(2);
  std::thread t1([&] {
    Failing f;
    ThreadCollectives c(world, 1, 2);
    RankSyncedRunner r(f, c);
    results[1] = search_batch_size(r, {});
  });
  testing::FakeRunner ok{testing::FakeLaw{}};
  ThreadCollectives c0(world, 0, 2);
  RankSyncedRunner r0(ok, c0);
  results[0] = search_batch_size(r0, {});
  t1.join();
  EXPECT_NE(results[0].error.find("error on rank 1"), std::string::npos) << results[0].error;
  EXPECT_NE(results[1].error.find("error on rank 1: shape mismatch"), std::string::npos) << results[1].error;
  EXPECT_EQ(results[0].trials.size(), results[1].trials.size());
}

TEST(RankSyncedTest, OneProcessIsTheLocalSearch) {
  testing::FakeLaw law;
  testing::FakeRunner a(law), b(law);
  SingleProcessCollectives one;
  RankSyncedRunner synced(a, one);
  const SearchResult s = search_batch_size(synced, {});
  const SearchResult l = search_batch_size(b, {});
  EXPECT_EQ(s.max_batch, l.max_batch);
  EXPECT_EQ(s.recommended_batch, l.recommended_batch);
  EXPECT_EQ(s.trials.size(), l.trials.size());
}

}  // namespace

static ThroughputPoint point(int64_t batch, double samples_per_s, bool settled, int rounds = 3) {
  ThroughputPoint p;
  p.batch = batch;
  p.ok = true;
  p.samples_per_s = samples_per_s;
  p.settled = settled;
  p.rounds = rounds;
  p.rel_std_error = settled ? 0.01 : 0.05;
  return p;
}

TEST(RankSyncedTest, TheRanksCurveIsTheSlowestRanksAtEachBatchEndingWhereAnyRankFailed) {
  // rank 0 is faster at 1 and 4, rank 1 at 2; rank 1 ran out of memory at 8; batch 4 settled on
  // rank 0 only
  ThroughputCurve a, b;
  a.points = {point(1, 100, true), point(2, 150, true), point(4, 400, true), point(8, 700, true)};
  b.points = {point(1, 90, true), point(2, 180, true), point(4, 300, false, 8)};
  ThroughputPoint oom;
  oom.batch = 8;
  oom.error = "oom";
  b.points.push_back(oom);
  const std::vector<int64_t> planned = {1, 2, 4, 8, 16};
  ThreadWorld world(2);
  std::vector<ThroughputCurve> out(2);
  std::thread t1([&] {
    ThreadCollectives c(world, 1, 2);
    out[1] = slowest_curve_across_ranks(b, planned, c);
  });
  ThreadCollectives c0(world, 0, 2);
  out[0] = slowest_curve_across_ranks(a, planned, c0);
  t1.join();
  for (const ThroughputCurve& c : out) {
    ASSERT_EQ(c.points.size(), 4u);  // 1, 2, 4 and the failure at 8; 16 was never reached
    EXPECT_DOUBLE_EQ(c.points[0].samples_per_s, 90);
    EXPECT_DOUBLE_EQ(c.points[1].samples_per_s, 150);
    EXPECT_DOUBLE_EQ(c.points[2].samples_per_s, 300);
    EXPECT_TRUE(c.points[0].settled && c.points[1].settled);
    EXPECT_FALSE(c.points[2].settled);
    EXPECT_EQ(c.points[2].rounds, 3);
    EXPECT_DOUBLE_EQ(c.points[2].rel_std_error, 0.05);
    EXPECT_FALSE(c.points[3].ok);
    EXPECT_EQ(c.best_batch, 4);
  }
  EXPECT_EQ(out[1].points[3].error, "oom");  // the rank that failed says why
  EXPECT_EQ(out[0].knee_batch, out[1].knee_batch);
}

}  // namespace saturate

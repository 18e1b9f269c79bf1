// Rank-synced search with real processes: two ranks with different CPU budgets, started by
// `saturate launch`, both finish with the smaller rank's exact max; no hang.
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace saturate {
namespace {

/// One trial of the test's model at `batch` under `budget` in a new `saturate probe` process (one
/// warm-up and one timed step, as the search's trials): its status, "ok" or "oom".
std::string probe_status(const std::string& model, const std::string& dir, const std::string& budget, int64_t batch) {
  const std::string json = dir + "/probe_" + budget + "_" + std::to_string(batch) + ".json";
  std::string out;
  testing::run_command("timeout 60 " + std::string(SATURATE_BINARY) + " probe " + model + " --memory-budget " + budget +
                           " --batch " + std::to_string(batch) + " --json " + json,
                       &out);
  std::ifstream in(json);
  if (!in) return "no result: " + out;
  return nlohmann::json::parse(in).value("status", "");
}

TEST(DistProcessTest, RankSyncedSearchWithUnequalBudgetsUsesTheSmallestRanksMax) {
  if (!std::getenv("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist";
  const std::string dir = testing::temp_dir("dist_search");
  const std::string bin = SATURATE_BINARY;
  const std::string shape = "--model mlp --layers 1 --width 64 --device cpu --timed-steps 1 --threads 1";
  const std::string model = shape + " -q";
  // rank 0: 40 MiB, rank 1: 24 MiB
  const std::string cmd = "timeout 100 " + bin + " launch --nproc-per-node 2 -- sh -c '" + "exec " + bin +
                          " search " + model +
                          " --memory-budget $([ \"$RANK\" = 0 ] && echo 40MiB || echo 24MiB) --json " + dir +
                          "/dist.json'";
  std::string out;
  ASSERT_EQ(testing::run_command(cmd, &out), 0) << out;
  std::string single_out;
  ASSERT_EQ(testing::run_command("timeout 60 " + bin + " search " + model + " --memory-budget 24MiB --json " + dir +
                                     "/single.json",
                                 &single_out),
            0)
      << single_out;
  std::ifstream a(dir + "/dist.json"), b(dir + "/single.json");
  const auto dist = nlohmann::json::parse(a);
  const auto single = nlohmann::json::parse(b);
  const int64_t max_batch = single["max_batch"].get<int64_t>();
  EXPECT_EQ(dist["max_batch"].get<int64_t>(), max_batch) << dist.dump(1);
  EXPECT_EQ(dist["world_size"].get<int>(), 2);
  ASSERT_EQ(dist["ranks"].size(), 2u);
  EXPECT_EQ(dist["ranks"][1]["max_batch"].get<int64_t>(), max_batch);
  EXPECT_TRUE(dist["ranks"][1]["max_batch_exact"].get<bool>());
  EXPECT_GT(dist["ranks"][0]["max_batch"].get<int64_t>(), max_batch);
  EXPECT_TRUE(dist["ranks"][0]["max_batch_exact"].get<bool>());
  EXPECT_NE(out.find("ranks              2 (gloo)"), std::string::npos) << out;
  // each rank's max exact, apart from the search's flags: in fresh processes under each rank's
  // budget the max fits and one more runs out of memory
  const int64_t max0 = dist["ranks"][0]["max_batch"].get<int64_t>();
  EXPECT_EQ(probe_status(shape, dir, "24MiB", max_batch), "ok");
  EXPECT_EQ(probe_status(shape, dir, "24MiB", max_batch + 1), "oom");
  EXPECT_EQ(probe_status(shape, dir, "40MiB", max0), "ok");
  EXPECT_EQ(probe_status(shape, dir, "40MiB", max0 + 1), "oom");
}

}  // namespace
}  // namespace saturate

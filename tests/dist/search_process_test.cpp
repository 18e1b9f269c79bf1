// Rank-synced search with real processes: two ranks with different CPU budgets, started by
// `saturate launch`, both finish with the smaller rank's exact max; no hang.
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/support.h"

namespace saturate {
namespace {

TEST(DistProcessTest, RankSyncedSearchWithUnequalBudgetsUsesTheSmallestRanksMax) {
  if (!std::getenv("SATURATE_DIST_TESTS")) GTEST_SKIP() << "multi-process: ctest -L dist";
  const std::string dir = testing::temp_dir("dist_search");
  const std::string bin = SATURATE_BINARY;
  const std::string model = "--model mlp --layers 1 --width 64 --device cpu --timed-steps 1 --threads 1 -q";
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
}

}  // namespace
}  // namespace saturate

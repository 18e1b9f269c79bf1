// `saturate search --checkpointing auto` with real processes under the CPU budget (real OOMs):
// both curves are reported, and what the search found is measured again afresh: the max batch
// with checkpointing runs with it and runs out of memory without it.
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/support.h"

namespace saturate {
namespace {

// a small gpt: four transformer blocks whose activations (attention, 4x MLP) dominate a sample.
const std::string kModel =
    "--model gpt --layers 4 --width 64 --heads 2 --seq-len 64 --vocab 512 --device cpu --memory-budget 96MiB "
    "--threads 1";

nlohmann::json run_json(const std::string& args) {
  // one folder per process (temp_dir clears it, and LibTorch's own remove_all fails on files)
  static const std::string dir = testing::temp_dir("checkpointing_search");
  static int runs = 0;
  const std::string path = dir + fmt::format("/run{}.json", runs++);
  std::string out;
  const int status =
      testing::run_command("timeout 600 " + std::string(SATURATE_BINARY) + " " + args + " --json " + path, &out);
  EXPECT_EQ(status, 0) << out;
  std::ifstream f(path);
  if (!f) return nlohmann::json::object();
  return nlohmann::json::parse(f);
}

std::string probe_status(int64_t batch, const std::string& checkpointing) {
  const nlohmann::json j = run_json(fmt::format("probe {} --batch {} --warmup 1 --timed-steps 1 --checkpointing {}", kModel,
                                                batch, checkpointing));
  return j.value("status", std::string("?"));
}

}  // namespace

TEST(CheckpointingSearchTest, AutoReportsBothCurvesAndCheckpointingRaisesTheMeasuredMaxBatch) {
  const nlohmann::json j = run_json("search " + kModel + " --timed-steps 1 --checkpointing auto -q");
  ASSERT_TRUE(j.contains("checkpointing")) << j.dump(1);
  const nlohmann::json& c = j["checkpointing"];
  EXPECT_EQ(c["policy"], "auto");
  ASSERT_TRUE(c["choice"] == "none" || c["choice"] == "blocks") << c.dump(1);
  EXPECT_FALSE(c["reason"].get<std::string>().empty());
  const nlohmann::json& none = c["curves"]["none"];
  const nlohmann::json& blocks = c["curves"]["blocks"];
  for (const nlohmann::json* curve : {&none, &blocks}) {
    EXPECT_TRUE((*curve)["memory_model"]["valid"].get<bool>()) << curve->dump(1);
    EXPECT_GT((*curve)["recommended_batch"].get<int64_t>(), 0);
    ASSERT_GE((*curve)["trials"].size(), 2u);
    bool measured = false;
    for (const auto& t : (*curve)["trials"])
      if (t["status"] == "ok") measured = measured || (t["samples_per_s"].get<double>() > 0 &&
                                                       t["peak_allocated_bytes"].get<int64_t>() > 0);
    EXPECT_TRUE(measured) << curve->dump(1);
  }
  // the answer at the top level is the chosen curve's
  EXPECT_EQ(j["max_batch"], c["curves"][c["choice"].get<std::string>()]["max_batch"]);

  const int64_t max_without = none["max_batch"].get<int64_t>();
  const int64_t max_with = blocks["max_batch"].get<int64_t>();
  ASSERT_GT(max_without, 0);
  // measured afresh, in new processes: the max found with checkpointing runs with it, and does
  // not fit without it; the max found without it still fits without it.
  EXPECT_EQ(probe_status(max_with, "blocks"), "ok");
  EXPECT_EQ(probe_status(max_with, "none"), "oom") << "checkpointing did not raise the max batch: " << max_without
                                                   << " without, " << max_with << " with";
  EXPECT_EQ(probe_status(max_without, "none"), "ok");
}

}  // namespace saturate

#include "saturate/monitor/op_profile.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace saturate {
namespace {

const OpRow* find_row(const OpTable& t, const std::string& name) {
  for (const OpRow& r : t.rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(OpProfileTest, CountsEachOpsCallsAndSubtractsNestedOpsFromSelfTime) {
  torch::NoGradGuard no_grad;
  const torch::Tensor a = torch::randn({256, 256});
  OpProfile profile;
  profile.start();
  for (int i = 0; i < 5; ++i) (void)torch::mm(a, a);
  for (int i = 0; i < 3; ++i) (void)torch::relu(a);
  const OpTable t = profile.stop();
  EXPECT_FALSE(profile.running());

  const OpRow* mm = find_row(t, "aten::mm");
  const OpRow* relu = find_row(t, "aten::relu");
  const OpRow* clamp = find_row(t, "aten::clamp_min");
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(clamp, nullptr);  // relu calls clamp_min on the CPU
  EXPECT_EQ(mm->calls, 5);
  EXPECT_EQ(relu->calls, 3);
  EXPECT_EQ(clamp->calls, 3);
  // relu's own time excludes the clamp_min nested in it
  EXPECT_LT(relu->self_ms, relu->total_ms);
  EXPECT_NEAR(relu->total_ms - relu->self_ms, clamp->total_ms, 1e-3 + 0.05 * clamp->total_ms);
  for (const OpRow& r : t.rows) EXPECT_LE(r.self_ms, r.total_ms + 1e-9) << r.name;
  // largest self time first, and the rows' self times add up to the table's and within its wall time
  for (size_t i = 1; i < t.rows.size(); ++i) EXPECT_GE(t.rows[i - 1].self_ms, t.rows[i].self_ms);
  double sum = 0;
  for (const OpRow& r : t.rows) sum += r.self_ms;
  EXPECT_NEAR(sum, t.self_ms_total, 1e-9);
  EXPECT_LE(t.self_ms_total, t.wall_ms * static_cast<double>(t.threads) + 1e-6);
  EXPECT_EQ(t.threads, 1);
}

TEST(OpProfileTest, JsonHasEachOpPerStep) {
  OpTable t;
  t.rows = {{"aten::mm", 10, 4.0, 5.0}};
  t.wall_ms = 10;
  t.self_ms_total = 4;
  t.threads = 1;
  const nlohmann::json j = op_table_json(t, 2);
  EXPECT_EQ(j["ops"][0]["name"], "aten::mm");
  EXPECT_DOUBLE_EQ(j["ops"][0]["calls_per_step"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["ops"][0]["self_ms_per_step"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["wall_ms_per_step"].get<double>(), 5.0);
}

}  // namespace
}  // namespace saturate

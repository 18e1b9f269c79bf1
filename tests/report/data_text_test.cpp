// The data lines for people come from the dataset, the trial's DataFindings and the skips.
#include "saturate/report/data_text.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

TEST(DataTextTest, TheLinesCarryTheFindingsAndTheSkips) {
  DataSource source{"fashion-mnist", 60000, 10, {}, "auto: the wait is under 2 % of the step"};
  DataFindings d;
  d.dataset = "fashion-mnist";
  d.workers = 3;
  d.prefetch = 2;
  d.wait_ms = 0.1234;
  d.wait_fraction = 0.0151;
  EXPECT_EQ(data_text(source, d),
            "data       fashion-mnist: 60000 samples, 10 classes\n"
            "workers    3 (auto: the wait is under 2 % of the step), prefetch 2\n"
            "data wait  0.12 ms per step (1.5 % of the step)\n");
  source.workers_note.clear();
  source.skipped.add("a.png: not an image", 2);
  EXPECT_EQ(data_text(source, d),
            "data       fashion-mnist: 60000 samples, 10 classes\n"
            "workers    3, prefetch 2\n"
            "data wait  0.12 ms per step (1.5 % of the step)\n"
            "skipped    2 bad samples (`skip_bad_samples`)\n"
            "           a.png: not an image\n");
}

}  // namespace
}  // namespace saturate

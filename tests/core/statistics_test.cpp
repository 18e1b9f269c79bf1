// core/statistics.h: the one median that the fast-path choice, the monitor's verdict and the
// network measurement share.
#include "core/statistics.h"

#include <gtest/gtest.h>

namespace saturate {
namespace {

TEST(Median, IsTheMiddleValueOrTheMeanOfTheTwoMiddleOnesAndZeroForNone) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({7.5}), 7.5);
  EXPECT_EQ(median({}), 0.0);
  // one preempted step among five moves it not at all
  EXPECT_EQ(median({10.0, 11.0, 10.5, 900.0, 10.2}), 10.5);
}

}  // namespace
}  // namespace saturate

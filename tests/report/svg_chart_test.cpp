// The SVG chart's marker labels: two vertical lines close together keep their labels apart.
#include "report/svg_chart.h"

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace saturate {
namespace {

std::vector<double> label_ys(const std::string& svg) {
  std::vector<double> ys;
  const std::regex text(R"re(<text class="line-label [^"]*" x="[0-9.]+" y="([0-9.-]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it)
    ys.push_back(std::stod((*it)[1]));
  return ys;
}

// issue 44: "recommended 1075" and "throughput 1024" were drawn over each other
TEST(SvgChartTest, LabelsOfNearbyVerticalLinesGoToSeparateRowsAndFarOnesShareOne) {
  SvgChart near("c", "t", linear_axis("x", 0, 2000), linear_axis("y", 0, 1));
  near.vline(1024, "1024", "marker throughput", "throughput 1024");
  near.vline(1075, "1075", "marker recommended", "recommended 1075");
  const auto ys = label_ys(near.svg());
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_GE(std::abs(ys[0] - ys[1]), 12.0) << near.svg();

  SvgChart far("c", "t", linear_axis("x", 0, 2000), linear_axis("y", 0, 1));
  far.vline(100, "100", "marker throughput", "throughput 100");
  far.vline(1900, "1900", "marker recommended", "recommended 1900");
  const auto same = label_ys(far.svg());
  ASSERT_EQ(same.size(), 2u);
  EXPECT_EQ(same[0], same[1]);
}

}  // namespace
}  // namespace saturate

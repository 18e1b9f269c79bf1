// Test main: the CPU budget allocator goes in before any tensor exists, as in saturate's main.
#include <gtest/gtest.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/cpu_math.h"

int main(int argc, char** argv) {
  saturate::install_cpu_budget_allocator();
  saturate::start_cpu_math_libraries();  // as every CPU session does (core/cpu_math.h)
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// Test main: the CPU budget allocator goes in before any tensor exists, as in saturate's main.
// `--fresh-child NAME ARG...` runs a registered check in this new process instead of the tests
// (support.h: run_fresh_child) and prints its answer.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "support/support.h"

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/cpu_math.h"

int main(int argc, char** argv) {
  saturate::install_cpu_budget_allocator();
  saturate::start_cpu_math_libraries();  // as every CPU session does (core/cpu_math.h)
  if (argc >= 3 && std::strcmp(argv[1], "--fresh-child") == 0) {
    const auto child = saturate::testing::find_fresh_child(argv[2]);
    if (!child) {
      std::cerr << "no fresh child named " << argv[2] << "\n";
      return 2;
    }
    try {
      std::cout << saturate::testing::kFreshChildAnswer << child(std::vector<std::string>(argv + 3, argv + argc))
                << std::endl;
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "fresh child " << argv[2] << ": " << e.what() << "\n";
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

# tests/cli/expect.cmake (run BIN with ARGS, check the exit status and EXPECT_REGEX), and then that
# stdout+stderr do NOT match FORBID_REGEX (e.g. "test accuracy" where only a val split exists).
include(${CMAKE_CURRENT_LIST_DIR}/../cli/expect.cmake)
if(all MATCHES "${FORBID_REGEX}")
  message(FATAL_ERROR "output matches the forbidden '${FORBID_REGEX}' (at '${CMAKE_MATCH_0}')\n--- output ---\n${all}")
endif()

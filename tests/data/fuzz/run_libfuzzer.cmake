# Runs the libFuzzer build for SECONDS from the plain driver's seed inputs; fails on a crash.
file(REMOVE_RECURSE ${CORPUS})
file(MAKE_DIRECTORY ${CORPUS})
execute_process(COMMAND ${DRIVER} --write-seeds ${CORPUS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing seeds failed (${rc})")
endif()
execute_process(COMMAND ${FUZZER} -max_total_time=${SECONDS} -rss_limit_mb=1024 -max_len=65536 -print_final_stats=1 ${CORPUS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libFuzzer found a failure (exit ${rc}); the crashing input is in the test's working folder")
endif()

# cmake -DSETTINGS=<file> -P consumer_test.cmake (tests/package/CMakeLists.txt writes the file):
# installs the build into WORK_DIR/prefix, configures, builds and runs examples/custom_step
# against it, and checks that it exits 0 and prints an exact max_batch.
include(${SETTINGS})

function(step what)
  message(STATUS "package test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)
# a clean install and a fresh configure every time (ccache keeps the rebuild short)
file(REMOVE_RECURSE ${prefix} ${build})

step("cmake --install ${BUILD_DIR} --prefix ${prefix}"
     ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f lib/cmake/saturate/saturate-config.cmake lib/cmake/saturate/saturate-targets.cmake
          include/saturate/probe/user_step.h bin/saturate)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "package test: the install has no ${f}")
  endif()
endforeach()

# the prefix path through an initial-cache file: it is a list, which -D flags pass badly
file(WRITE ${WORK_DIR}/init.cmake
  "set(CMAKE_PREFIX_PATH [==[${prefix};${TORCH_PREFIX_PATH}]==] CACHE STRING \"\")\n")
step("configure examples/custom_step with find_package(saturate)"
     ${CMAKE_COMMAND} -C ${WORK_DIR}/init.cmake -S ${SOURCE_DIR} -B ${build} -G ${GENERATOR}
     -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
     -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
step("build examples/custom_step" ${CMAKE_COMMAND} --build ${build} -j 2)
step("run custom_step" ${build}/custom_step)
message(STATUS "custom_step's output:\n${step_output}")
if(NOT step_output MATCHES "max_batch +[1-9][0-9]* \\(exact\\)")
  message(FATAL_ERROR "package test: custom_step did not print an exact max_batch")
endif()
# the library's trainer on the user's module: 3 steps at the global batch, a checkpoint written
if(NOT step_output MATCHES "trained +3 steps, micro-batch [1-9][0-9]* x [1-9][0-9]* = global batch [1-9][0-9]*, [0-9]+ OOM back-off\\(s\\), [1-9][0-9]* checkpoint")
  message(FATAL_ERROR "package test: custom_step did not train its model through saturate's Trainer")
endif()
message(STATUS "custom_step: ok")

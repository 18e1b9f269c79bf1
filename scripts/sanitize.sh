#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the library, the tool and the tests in
# their own folder, then the unit tests (the GoogleTest binary, label `unit`) against it.
# Leak checking is off: LibTorch keeps global state to the end of the process by design.
# A finding aborts its test (halt_on_error), so ctest's status is the verdict. Prints the build's
# and the tests' times. Usage: scripts/sanitize.sh [BUILD_DIR] [JOBS] [extra ctest args...]
set -euo pipefail
BUILD=${1:-build-asan}
JOBS=${2:-$(nproc)}
shift $(( $# < 2 ? $# : 2 ))
PYTHON=${PYTHON:-python3}
cd "$(dirname "$0")/.."
start=$(date +%s)
# NDEBUG as LibTorch was built: its headers add members without it (RecordFunction::inputs_valid_),
# and a layout that differs from the library's is read as garbage (UBSan: "load of value 101, which
# is not a valid value for type 'bool'" in record_function.h, the first run of this target).
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DSATURATE_SANITIZE=address,undefined \
  -DSATURATE_BUILD_PYTHON=OFF -DSATURATE_BUILD_EXAMPLES=OFF \
  -DCMAKE_PREFIX_PATH="$("$PYTHON" -c 'import torch;print(torch.utils.cmake_prefix_path)')" \
  -DPython3_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target saturate saturate_tests
built=$(date +%s)
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$BUILD"
set +e
ctest --output-on-failure -j "$JOBS" --timeout 1800 -L unit "$@"
rc=$?
echo "sanitize: build $(( built - start )) s, unit tests $(( $(date +%s) - built )) s; ctest status $rc" >&2
exit $rc

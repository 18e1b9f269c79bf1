#!/usr/bin/env bash
# The whole suite with every core busy (one stress-ng CPU hog per core, as on a developer's busy
# machine where CI runs): a test that depends on timing fails here first. Installs stress-ng
# when missing; prints the time taken. Usage: scripts/test_loaded.sh [BUILD_DIR] [JOBS]
set -euo pipefail
BUILD=${1:-build}
JOBS=${2:-$(nproc)}
if ! command -v stress-ng >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq stress-ng >&2
fi
stress-ng --cpu "$(nproc)" --timeout 6h >/dev/null 2>&1 &
hog=$!
trap 'kill $hog 2>/dev/null || true' EXIT
start=$(date +%s)
cd "$BUILD"
set +e
ctest --output-on-failure -j "$JOBS" --timeout 1800
rc=$?
echo "test-loaded: $(( $(date +%s) - start )) s with $(nproc) CPU hogs; ctest status $rc" >&2
exit $rc

#!/usr/bin/env bash
# Installs what saturate needs and is missing; safe to run again (skips what is present).
# Debian packages through apt, torch==2.11.0 (the CUDA 13 wheel, runs on CPU too) from PyPI
# into the user's Python, outside the clone, so that fresh clones reuse it.
set -euo pipefail
PY=${PYTHON:-python3}
TORCH_VERSION=2.11.0
DEBS=(build-essential cmake ninja-build ccache pkg-config libcli11-dev nlohmann-json3-dev
      libgtest-dev googletest libbenchmark-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev libarchive-dev
      libgloo-dev
      chromium  # headless, it renders the HTML reports in their end-to-end test (tests/report)
      dataset-fashion-mnist)
missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi
have=$($PY -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$have" != "$TORCH_VERSION" ]; then
  echo "setup: installing torch==$TORCH_VERSION from PyPI (found: '${have:-none}')" >&2
  if ! $PY -m pip install -q "torch==$TORCH_VERSION" numpy >&2; then
    echo "setup: error: could not install torch==$TORCH_VERSION from PyPI (see pip's message above)." >&2
    echo "setup: saturate needs LibTorch 2.11; Debian's libtorch is too old and is not used." >&2
    exit 1
  fi
fi
$PY -c 'import numpy' 2>/dev/null || $PY -m pip install -q numpy >&2
# `pip install --no-build-isolation .` needs wheel; the Python package's tests need pytest (CTest
# skips them without it) and the tools its drop-ins replace, Lightning and Accelerate (their
# tests skip without them). torch is pinned in the same command so that pip keeps 2.11.
pymissing=()
for m in pytest wheel lightning accelerate torchvision; do
  $PY -c "import $m" 2>/dev/null || pymissing+=("$m")
done
if ((${#pymissing[@]})); then
  echo "setup: installing Python test dependencies: ${pymissing[*]}" >&2
  $PY -m pip install -q "${pymissing[@]}" "torch==$TORCH_VERSION" >&2 ||
    echo "setup: warning: could not install ${pymissing[*]}; their Python tests will be skipped" >&2
fi
exit 0

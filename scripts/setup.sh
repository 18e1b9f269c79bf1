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
# `pip install --no-build-isolation .` needs wheel; the Python package's tests need pytest, the
# tools its drop-ins replace (Lightning, Accelerate) and the model libraries its tests build real
# architectures from (torchvision, transformers, timm; from configs, no downloads). Pinned, and a
# failure here fails the setup: a missing one would fail the suite, not skip it. torch is pinned
# in the same command so that pip keeps 2.11.
PYDEPS=(pytest==9.2.0 wheel==0.48.0 lightning==2.6.6 accelerate==1.16.0 torchvision==0.26.0
        transformers==5.25.0 timm==1.0.31)
pymissing=()
for spec in "${PYDEPS[@]}"; do
  name=${spec%%==*}; want=${spec#*==}
  got=$($PY -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)
  [ "$got" = "$want" ] || pymissing+=("$spec")
done
if ((${#pymissing[@]})); then
  echo "setup: installing Python test dependencies: ${pymissing[*]}" >&2
  if ! $PY -m pip install -q "${pymissing[@]}" "torch==$TORCH_VERSION" >&2; then
    echo "setup: error: could not install ${pymissing[*]} from PyPI (see pip's message above); the" >&2
    echo "setup: Python tests need them: run scripts/setup.sh again once PyPI is reachable." >&2
    exit 1
  fi
fi
exit 0

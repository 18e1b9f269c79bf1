#!/usr/bin/env bash
# Fills third_party/ with header-only dependencies and GoogleTest's sources so that a
# machine without Debian packages or network (an offline GPU node) can build saturate.
# CMake uses these only when the system packages are not found.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dst="$root/third_party"
mkdir -p "$dst/include"
cp -r /usr/include/CLI "$dst/include/"
cp -r /usr/include/nlohmann "$dst/include/"

rm -rf "$dst/googletest"
cp -r /usr/src/googletest "$dst/googletest"
echo "third_party filled: $(du -sh "$dst" | cut -f1)" >&2

#!/usr/bin/env bash
# Packs the binaries built here, with the shared libraries they need that a GPU machine without
# Debian packages lacks, into gpu-pack/ (ignored by git), so that `make gpu-check` there runs
# them without building (docs/gpu.md). Run after `make build`; it builds nothing.
#
#   gpu-pack/bin/saturate, gpu-pack/bin/saturate_tests
#   gpu-pack/python/saturate/            the Python package (_saturate*.so included)
#   gpu-pack/lib/                        libjpeg, libpng, libarchive and what they pull in
#   gpu-pack/lib/*.xz                    libraries over 8 MiB, xz-compressed (libicudata);
#                                        scripts/gpu_check.sh unpacks them with Python's lzma
#   gpu-pack/lib-gcc/                    libstdc++ / libgcc_s of this machine, used there only
#                                        when the machine's own are too old (ldd says so)
#   gpu-pack/MANIFEST.txt                what was packed, from where, and the build's settings
#
# Not packed: LibTorch and the NVIDIA libraries (the torch wheel there has them: the check sets
# LD_LIBRARY_PATH to its torch/lib and nvidia/*/lib), glibc, and libgomp (the wheel's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
dst=$root/gpu-pack
python=${PYTHON:-python3}

bins=("$build/saturate" "$build/tests/saturate_tests")
for f in "${bins[@]}"; do
  [[ -x $f ]] || { echo "gpu-pack: $f is missing: build it first (make build)" >&2; exit 1; }
done
pydir=$build/python/saturate
so=$(ls "$pydir"/_saturate*.so 2>/dev/null | head -n 1 || true)
[[ -n $so ]] || echo "gpu-pack: warning: no $pydir/_saturate*.so: the Python package is not packed" >&2

# a build in progress leaves empty or half-written files: refuse them rather than pack them
for f in "${bins[@]}" ${so:+"$so"}; do
  if [[ ! -s $f ]] || ! readelf -h "$f" >/dev/null 2>&1; then
    echo "gpu-pack: $f is empty or not a complete ELF file (a build still running?): run make gpu-pack again after it" >&2
    exit 1
  fi
done

rm -rf "$dst"
mkdir -p "$dst/bin" "$dst/lib" "$dst/lib-gcc"
cp -p "${bins[@]}" "$dst/bin/"
if [[ -n $so ]]; then
  mkdir -p "$dst/python"
  cp -rp "$pydir" "$dst/python/saturate"
  rm -rf "$dst/python/saturate/__pycache__"
fi

# every library ldd resolves for the packed ELF files (ldd lists the whole closure)
elfs=("$dst/bin/saturate" "$dst/bin/saturate_tests")
[[ -n $so ]] && elfs+=("$dst/python/saturate/$(basename "$so")")
torch_dir=$("$python" -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>/dev/null || echo /nonexistent)
site=$(dirname "$torch_dir")
skip_re='^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libnsl|libanl|ld-linux-x86-64|linux-vdso|libgomp)\.so'
manifest=$dst/MANIFEST.txt
{
  echo "saturate gpu-pack, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo '(working tree modified)')"
  echo "torch here: $("$python" -c 'import torch;print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo '?')"
  echo "python here: $("$python" -c 'import sys;print(sys.version.split()[0])' 2>/dev/null || echo '?')"
  echo "glibc here: $(ldd --version 2>/dev/null | head -n 1)"
  grep -E '^(CMAKE_BUILD_TYPE|SATURATE_[A-Z_]+):' "$build/CMakeCache.txt" 2>/dev/null | sed 's/^/cmake: /' || true
  if readelf -d "$build/saturate" 2>/dev/null | grep -q 'libtorch_cuda'; then echo "cuda: linked (libtorch_cuda)"
  else echo "cuda: NOT linked: this build has no CUDA code; the GPU check needs a CUDA build"; fi
  echo "binaries:"
  for e in "${elfs[@]}"; do echo "  ${e#$dst/}  $(stat -c %s "$e") bytes"; done
  echo "libraries:"
} >"$manifest"

ldd "${elfs[@]}" 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
  real=$(readlink -f "$path")
  case $real in
    "$torch_dir"/*|"$site"/nvidia/*|/usr/local/cuda*) continue ;;  # the wheel's / the CUDA toolkit's
  esac
  if [[ $name =~ $skip_re ]]; then continue; fi
  if [[ $name =~ ^(libstdc\+\+|libgcc_s)\.so ]]; then
    cp -L "$path" "$dst/lib-gcc/$name"
    echo "  lib-gcc/$name  <- $real" >>"$manifest"
    continue
  fi
  size=$(stat -c %s "$real")
  if (( size > 8 * 1024 * 1024 )); then
    "$python" - "$real" "$dst/lib/$name.xz" <<'EOF'
import lzma, sys
with open(sys.argv[1], "rb") as f, lzma.open(sys.argv[2], "wb", preset=6) as g:
    g.write(f.read())
EOF
    echo "  lib/$name.xz  <- $real ($size bytes, xz)" >>"$manifest"
  else
    cp -L "$path" "$dst/lib/$name"
    echo "  lib/$name  <- $real" >>"$manifest"
  fi
done

# what the binaries need from glibc / libstdc++, to compare with the GPU machine's
{
  echo "symbol versions needed (highest):"
  for v in GLIBC GLIBCXX CXXABI; do
    hi=$(for e in "${elfs[@]}"; do objdump -T "$e" 2>/dev/null; done | grep -o "${v}_[0-9.]*" | sort -uV | tail -n 1)
    echo "  ${hi:-$v: none found}"
  done
} >>"$manifest"

bytes=$(du -sb "$dst" | cut -f1)
echo "gpu-pack: $(du -sh "$dst" | cut -f1) ($bytes bytes) in $dst" | tee -a "$manifest" >&2
if (( bytes > 40 * 1024 * 1024 )); then
  echo "gpu-pack: warning: over 40 MiB; the device run carries 64 MiB at most (with third_party/)" >&2
fi

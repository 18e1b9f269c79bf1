#!/usr/bin/env bash
# `make gpu-check`: the whole GPU check in one command, for a GPU machine without Debian
# packages or network (docs/gpu.md). Finds the binaries (gpu-pack/ made here by `make gpu-pack`,
# else a build into build-gpu/ from third_party/), then runs bench/gpu_check.py, which records
# every check to bench/results/gpu.md (and copies it with the raw results into $OUT when set).
#
#   bash scripts/gpu_check.sh [--dry-run] [--device cpu --quick] [--deadline S] [--no-build]
#                             [--saturate BIN --tests BIN] [other bench/gpu_check.py flags]
#
# The overall deadline (default 560 s) covers setup and checks; each step has its own timeout,
# and a failed or timed-out step is a row of the table, never the end of the run.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
python=${PYTHON:-python3}
deadline=560
dry=0
nobuild=0
have_bins=0
args=()
while (($#)); do
  case $1 in
    --dry-run) dry=1; args+=("$1") ;;
    --no-build) nobuild=1 ;;
    --deadline) deadline=$2; shift ;;
    --deadline=*) deadline=${1#*=} ;;
    --saturate|--tests) have_bins=1; args+=("$1" "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done
work=$root/bench/out/gpu
mkdir -p "$work"
setup_log=$work/setup.log
: >"$setup_log"
say() { echo "gpu-check: $*" >&2; echo "$*" >>"$setup_log"; }
left() { echo $((deadline - ($(date +%s) - start))); }

# --- the torch wheel's libraries (LibTorch, CUDA, cuDNN, NCCL) ---------------------------------
torch_dir=$(timeout 60 "$python" -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>>"$setup_log")
if [[ -z $torch_dir ]]; then
  say "python3 cannot import torch: the saturate binaries cannot find LibTorch"
  torch_ld=""
else
  torch_ld=$torch_dir/lib
  for d in "$(dirname "$torch_dir")"/nvidia/*/lib "$(dirname "$torch_dir")"/nvidia/*/*/lib; do
    [[ -d $d ]] && torch_ld+=":$d"
  done
fi

ld_path=""
setup_note=""
sat="" tests=""
pack=$root/gpu-pack

check_ldd() {  # prints the libraries ldd cannot resolve (empty: all found, or no ldd to ask)
  local out
  command -v ldd >/dev/null || return 0
  out=$(LD_LIBRARY_PATH="$1" ldd "${@:2}" 2>&1)
  grep -E 'not found' <<<"$out" | sed 's/^[[:space:]]*//' | sort -u
}

if ((have_bins)); then
  setup_note="binaries given on the command line"
  ld_path=$torch_ld
elif [[ -x $pack/bin/saturate ]]; then
  say "using gpu-pack/ (no build): $(head -n 2 "$pack/MANIFEST.txt" 2>/dev/null | tr '\n' ' ')"
  libdir=$pack/lib
  if compgen -G "$pack/lib/*.xz" >/dev/null; then
    if ((dry)); then
      say "would unpack $(ls "$pack"/lib/*.xz | xargs -n1 basename | tr '\n' ' ')into a temporary folder"
    else
      libdir=$(mktemp -d "${TMPDIR:-/tmp}/saturate-gpu-lib.XXXXXX")
      cp -p "$pack"/lib/*.so* "$libdir"/ 2>/dev/null
      for x in "$pack"/lib/*.xz; do
        "$python" -c 'import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
          "$x" "$libdir/$(basename "${x%.xz}")" || say "cannot unpack $x"
      done
      rm -f "$libdir"/*.xz
    fi
  fi
  ld_path=$libdir${torch_ld:+:$torch_ld}
  bins=("$pack/bin/saturate" "$pack/bin/saturate_tests")
  missing=$( ((dry)) || check_ldd "$ld_path" "${bins[@]}")
  if [[ -n $missing ]]; then
    say "with the machine's libstdc++: $(tr '\n' ';' <<<"$missing") - trying gpu-pack/lib-gcc"
    ld_path=$libdir:$pack/lib-gcc${torch_ld:+:$torch_ld}
    missing=$(check_ldd "$ld_path" "${bins[@]}")
  fi
  if [[ -n $missing ]]; then
    say "gpu-pack binaries cannot load here: $(tr '\n' ';' <<<"$missing")"
    setup_note="gpu-pack unusable (missing: $(tr '\n' ' ' <<<"$missing"))"
  else
    sat=$pack/bin/saturate tests=$pack/bin/saturate_tests
    setup_note="gpu-pack ($(sed -n 2p "$pack/MANIFEST.txt" 2>/dev/null)), LD_LIBRARY_PATH set for it"
  fi
fi

# --- no pack (or an unusable one): build into build-gpu with bounded time ----------------------
if [[ -z $sat ]] && ((!have_bins)) && ((!nobuild)); then
  bdir=$root/build-gpu
  prefix=$(timeout 60 "$python" -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  jobs=$(nproc 2>/dev/null || echo 4)
  configure=(cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
             -DPython3_EXECUTABLE="$(command -v "$python")" -DSATURATE_USE_CCACHE=OFF -DSATURATE_BUILD_EXAMPLES=OFF)
  build=(cmake --build "$bdir" -j "$jobs" --target saturate saturate_tests _saturate)
  if ((dry)); then
    say "no gpu-pack/: would configure: ${configure[*]}"
    say "no gpu-pack/: would build (timeout 360 s): ${build[*]}"
    sat=$bdir/saturate tests=$bdir/tests/saturate_tests
  elif ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
    say "no gpu-pack/ and no cmake/ninja here: cannot build saturate; running the Python-only checks"
    setup_note+="${setup_note:+; }no binaries: cmake or ninja missing"
  else
    [[ -d third_party/include ]] || say "warning: third_party/ is missing (make deps here, then carry it): CLI11/json/gtest must come from the system"
    say "building into build-gpu (configure 120 s, build 360 s at most) ..."
    if ! timeout 120 "${configure[@]}" >>"$setup_log" 2>&1; then
      why=$(grep -oE 'Could NOT find [A-Za-z0-9_]+' "$setup_log" | sort -u | tr '\n' ',' | sed 's/,$//')
      say "configure failed: ${why:-see setup.log} (Debian -dev packages such as libjpeg/libpng/libarchive/zlib are needed to build; make gpu-pack on the build machine avoids building here)"
      setup_note+="${setup_note:+; }build impossible: configure failed (${why:-see setup.log})"
    else
      budget=$(( $(left) - 240 ))
      ((budget > 360)) && budget=360
      if ((budget < 60)); then
        say "not enough time left to build (${budget} s)"
        setup_note+="${setup_note:+; }build skipped: no time left"
      elif timeout "$budget" "${build[@]}" >>"$setup_log" 2>&1; then
        sat=$bdir/saturate tests=$bdir/tests/saturate_tests
        ld_path=$torch_ld
        setup_note+="${setup_note:+; }built into build-gpu in $(( $(date +%s) - start )) s"
      else
        rc=$?
        say "build failed (rc $rc$( ((rc == 124)) && echo ', timed out')); last lines in setup.log"
        tail -n 15 "$setup_log" >&2
        setup_note+="${setup_note:+; }build failed (rc $rc)"
      fi
    fi
  fi
elif [[ -z $sat ]] && ((!have_bins)); then
  setup_note+="${setup_note:+; }no binaries (--no-build)"
fi

py_args=(--deadline "$(left)" --setup-note "$setup_note" --setup-log "$setup_log")
[[ -n $sat ]] && py_args+=(--saturate "$sat")
[[ -n $tests ]] && py_args+=(--tests "$tests")
[[ -n $ld_path ]] && py_args+=(--ld-library-path "$ld_path")
say "setup: ${setup_note:-none} ($(( $(date +%s) - start )) s); checks get $(left) s"
timeout $(( $(left) + 30 )) "$python" bench/gpu_check.py "${py_args[@]}" "${args[@]}"
rc=$?
if ((rc != 0)) && ((!dry)); then
  say "bench/gpu_check.py ended with rc $rc"
  res=bench/results/gpu.md
  for a in "${args[@]}"; do [[ $a == --quick ]] && res=bench/results/gpu_rehearsal_cpu.md; done
  if [[ ! -s $res ]]; then  # the table is always written
    mkdir -p bench/results
    { echo "# GPU check: did not run"; echo; echo "bench/gpu_check.py ended with rc $rc before writing its table."
      echo; echo "setup: $setup_note"; echo; echo '```'; tail -n 40 "$setup_log"; echo '```'; } >"$res"
  fi
  [[ -n ${OUT:-} ]] && mkdir -p "$OUT" && cp -f "$res" "$setup_log" "$OUT"/ 2>/dev/null
fi
exit $rc

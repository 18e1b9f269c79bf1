#!/usr/bin/env bash
# The loop's time, side by side on this machine, one after the other (issue 46 item 8; results in
# bench/results/loop_time.md):
#   1. clean builds of one commit without ccache, unity batches on and off (-DSATURATE_UNITY): the
#      tool alone (what `make run` builds) and then everything else (tests, Python module, benches);
#   2. the GoogleTest cases `make test` runs (not DistProcessTest: tests/dist/; not the long
#      noise-scale case), at -j JOBS: one process per case (as gtest_discover_tests registered them
#      before) and one per suite (tests/support/register_gtest_suites.py), with the unity build's binary.
# Usage: bench/loop_time.sh [COMMIT] [JOBS]   (about 45 minutes on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:-HEAD}
jobs=${2:-$(nproc)}
work=${LOOP_TIME_DIR:-/tmp/saturate_loop_time}
rm -rf "$work" && mkdir -p "$work"
git clone -q "$here" "$work/src" && git -C "$work/src" checkout -q "$commit"
prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.0f}')"; }

for unity in ON OFF; do
  b=$work/build_$unity
  cmake -S "$work/src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
        -DPython3_EXECUTABLE="$(command -v python3)" -DSATURATE_UNITY=$unity -DSATURATE_USE_CCACHE=OFF > "$b.cmake.log"
  s=$(now); ninja -C "$b" -j "$jobs" saturate > "$b.tool.log"
  t=$(now); ninja -C "$b" -j "$jobs" > "$b.rest.log"
  e=$(now)
  echo "build unity=$unity: tool $(secs "$s" "$t") s, the rest $(secs "$t" "$e") s, all $(secs "$s" "$e") s"
done

bin=$work/build_ON/tests/saturate_tests
cd "$work/build_ON/tests"
"$bin" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}' |
  grep -v '^DistProcessTest\.' | grep -v '^GradientNoiseScale\.OnAConvnetAndFashionMnist' > "$work/cases.txt"
sed 's/\..*//' "$work/cases.txt" | uniq > "$work/suites.txt"
s=$(now)
xargs -P "$jobs" -I{} sh -c "'$bin' --gtest_filter='{}' > /dev/null 2>&1 || echo '{}'" < "$work/cases.txt" > "$work/case_failed.txt"
m=$(now)
xargs -P "$jobs" -I{} sh -c "'$bin' --gtest_filter='{}.*:-GradientNoiseScale.OnAConvnetAndFashionMnist*' > /dev/null 2>&1 || echo '{}'" \
  < "$work/suites.txt" > "$work/suite_failed.txt"
e=$(now)
echo "gtest at -j $jobs: $(wc -l < "$work/cases.txt") cases, a process each $(secs "$s" "$m") s" \
     "(failed: $(wc -l < "$work/case_failed.txt")); $(wc -l < "$work/suites.txt") suites, a process each" \
     "$(secs "$m" "$e") s (failed: $(wc -l < "$work/suite_failed.txt"))"

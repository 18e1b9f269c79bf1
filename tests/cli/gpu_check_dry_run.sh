#!/usr/bin/env bash
# `make gpu-check GPU_CHECK_ARGS=--dry-run` on a machine without a GPU: prints each check's command
# (a..g of docs/gpu.md) with the given binaries and the full-size models, runs none of them, and
# writes no table.  usage: gpu_check_dry_run.sh SOURCE_DIR SATURATE_BIN TESTS_BIN
set -uo pipefail
src=$1 sat=$2 tests=$3
table=$src/bench/results/gpu.md
before=$( [[ -e $table ]] && md5sum "$table" )
out=$(cd "$src" && make -s gpu-check GPU_CHECK_ARGS="--dry-run --saturate $sat --tests $tests" 2>&1)
rc=$?
fail() { echo "FAIL: $*"; echo "--- output ---"; echo "$out"; exit 1; }
((rc == 0)) || fail "the dry run exited $rc"
expect=(
  "\[a tests\] .*$tests '--gtest_filter=\*CUDA\*'"
  "\[b search resnet50\] .*$sat search --model resnet50 --device cuda"
  "\[b probe resnet50 max\+1\] .*--batch '<max_batch\+1>'"
  "\[b search gpt\] .*--model gpt --device cuda"
  "\[c probe convnet\] .*$sat probe --model .*convnet.pt"
  "\[c torch gptblocks\] .*\"kind\": \"peak\""
  "\[d plan resnet50\] .*--plan-for"
  "\[e nvidia-smi, alongside\] \\\$ nvidia-smi"
  "\[e\+f train under monitor\] .*$sat monitor .* -- $sat train --model resnet50"
  "\[f torch.compile inductor\]"
  "\[g gemm peak\] .*\"kind\": \"gemm\", \"device\": \"cuda\", \"n\": 8192"
)
for re in "${expect[@]}"; do
  grep -Eq -- "$re" <<<"$out" || fail "no line matches: $re"
done
after=$( [[ -e $table ]] && md5sum "$table" )
[[ $before == "$after" ]] || fail "the dry run changed $table"
echo "ok: ${#expect[@]} checks printed, nothing run"

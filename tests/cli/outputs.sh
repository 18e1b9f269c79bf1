#!/usr/bin/env bash
# Outputs are written as the user meant (issue 11): never replacing a FIFO, a device or a
# symlink, refusing a folder, leaving no temporary, and naming a file size limit.
#   usage: outputs.sh SATURATE_BIN WORK_DIR CASE
# CASE: json_to_dev_stdout | json_into_a_fifo | save_into_a_fifo | json_to_a_folder | file_size_limit
set -uo pipefail
bin=$1 work=$2 case=$3
dir=$work/outputs_$case
rm -rf "$dir" && mkdir -p "$dir" || exit 1
out=""
fail() { echo "FAIL ($case): $*"; echo "--- output ---"; echo "$out"; echo "--- $dir ---"; ls -la "$dir"; exit 1; }
# the cheapest runs that write a result
search=(search --model mlp --width 32 --device cpu --memory-budget 24MiB --threads 1 --timed-steps 1 -q)
probe=(probe --model mlp --width 32 --device cpu --batch 8 --timed-steps 1 --threads 1)
train=(train --model mlp --width 32 --data synthetic --device cpu --batch 8 --steps 1 --threads 1 -q)

# runs saturate with its output into $dir/reader.out read from the FIFO $fifo; fails when the
# reader never sees a writer (the FIFO was replaced) or the FIFO is no longer one
run_with_fifo_reader() {
  local fifo=$dir/fifo
  mkfifo "$fifo" || fail "mkfifo"
  cat "$fifo" >"$dir/reader.out" &
  local reader=$!
  out=$("$bin" "$@" "$fifo" 2>&1)
  rc=$?
  for _ in $(seq 100); do kill -0 "$reader" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$reader" 2>/dev/null; then
    kill "$reader"
    fail "the reader of $fifo never saw a writer (exit status $rc)"
  fi
  wait "$reader"
  [[ -p $fifo ]] || fail "$fifo is no longer a FIFO"
  rm -f "$fifo"
}

case $case in
  json_to_dev_stdout)
    # into a pipe, and into a file a shell redirected stdout to: the table and the JSON both there
    out=$("$bin" "${search[@]}" --json /dev/stdout 2>&1)
    rc=$?
    ((rc == 0)) || fail "exit status $rc"
    grep -q '"max_batch": [1-9]' <<<"$out" || fail "no JSON on stdout"
    "$bin" "${search[@]}" --json /dev/stdout >"$dir/stdout.txt" 2>"$dir/stderr.txt" || fail "exit status $? into a file"
    out=$(cat "$dir/stdout.txt" "$dir/stderr.txt")
    grep -q '^max_batch ' "$dir/stdout.txt" || fail "the table is gone from the redirected stdout"
    grep -q '"max_batch": [1-9]' "$dir/stdout.txt" || fail "no JSON in the redirected stdout"
    [[ -L /dev/stdout ]] || fail "/dev/stdout is no longer a symlink"
    ;;
  json_into_a_fifo)
    run_with_fifo_reader "${search[@]}" --json
    ((rc == 0)) || fail "exit status $rc"
    grep -q '"max_batch": [1-9]' "$dir/reader.out" || fail "the FIFO's reader got no JSON: $(head -c 200 "$dir/reader.out")"
    ;;
  save_into_a_fifo)
    run_with_fifo_reader "${train[@]}" --save
    ((rc == 0)) || fail "exit status $rc"
    # torch::save writes a zip archive
    [[ $(head -c 2 "$dir/reader.out") == PK ]] || fail "the FIFO's reader got no model archive"
    ;;
  json_to_a_folder)
    mkdir "$dir/results"
    out=$("$bin" "${probe[@]}" --json "$dir/results" 2>&1)
    rc=$?
    ((rc == 2)) || fail "exit status $rc, expected 2"
    grep -q -- "--json $dir/results: is a folder, not a file; give a file path such as $dir/results/result.json" <<<"$out" ||
      fail "no message naming the folder and a file path"
    [[ $(ls -A "$dir") == results && -z $(ls -A "$dir/results") ]] || fail "something was left behind"
    ;;
  file_size_limit)
    # 1 KiB: the probe's JSON is larger. Without a handler SIGXFSZ ends the run with no message.
    out=$(ulimit -f 1 && "$bin" "${probe[@]}" --json "$dir/probe.json" 2>&1)
    rc=$?
    ((rc == 1)) || fail "exit status $rc, expected 1"
    grep -q -- "--json $dir/probe.json: writing failed: the file size limit (ulimit -f) was reached" <<<"$out" ||
      fail "no message naming the file size limit"
    [[ -z $(ls -A "$dir") ]] || fail "something was left behind"
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "ok ($case)"

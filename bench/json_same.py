#!/usr/bin/env python3
"""Runs the README's examples (search, probe, memory, train; small CPU sizes) with two saturate
binaries and compares their JSON, timing keys aside (issue 46: a refactor leaves the JSON as it
was). Keys must match everywhere; values must match except under keys that hold measured time,
speed or machine state (TIMED), whose values differ from run to run by nature.

    json_same.py BEFORE_BINARY AFTER_BINARY [--keep DIR]

Prints each command and its differences; exits 1 when any command's JSON differs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

COMMANDS = [
    ["search", "--model", "mlp", "--device", "cpu", "--memory-budget", "64MiB"],
    # the batch the curve's knee picks is timed: the decision's and the objective's batch by presence
    ["search", "--model", "mlp", "--device", "cpu", "--memory-budget", "64MiB", "--objective", "throughput"],
    ["probe", "--model", "gpt", "--layers", "2", "--width", "64", "--seq-len", "32", "--batch", "8", "--device", "cpu"],
    ["memory", "--model", "convnet", "--batch", "32", "--leak-check-steps", "10", "--device", "cpu"],
    ["train", "--model", "mlp", "--data", "synthetic", "--device", "cpu", "--steps", "20", "--batch", "32",
     "--seed", "1"],
    ["train", "--model", "mlp", "--device", "cpu", "--memory-budget", "160MiB", "--global-batch", "4096", "--batch",
     "auto", "--steps", "4", "--data", "synthetic", "--seed", "1"],
    # two DDP ranks (Gloo): the ranks' part of the summary
    ["launch", "--nproc-per-node", "2", "--", "{bin}", "train", "--model", "mlp", "--data", "synthetic", "--device",
     "cpu", "--steps", "4", "--batch", "32", "--seed", "1", "--json", "{json}"],
]

# keys whose values are measured time, speed, load or the build/host: compared by presence only
TIMED = re.compile(r"(_ms|_us|seconds|_s$|per_s|mfu|hfu|_share|utilization|busy|wait|speedup|gain|knee|rss|"
                   r"git_|version|commit|host|timestamp|date|cpus|load|throughput_batch|fastest|overhead|"
                   r"phases|bottleneck|verdict|reason|fix|evidence|between|run_queue|own_samples|time|eta|"
                   r"peak_flops|peak_method|sampler|curve|alternatives|note|overlap|slowdown|straggler)", re.I)


# keys present only when a timing says so (a rank waited over a tenth of the step for another)
TIMED_PRESENCE = {"straggler"}
# paths whose values follow from timings (a throughput search's pick), compared by presence
TIMED_PATHS = {".compute.batch", ".decision.batch", ".objective.batch"}


def differences(a, b, path=""):
    """(path, before, after) for each difference, timing keys compared by presence."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted((set(a) | set(b)) - TIMED_PRESENCE):
            p = f"{path}.{k}"
            if k not in a or k not in b:
                yield p, a.get(k, "<absent>"), b.get(k, "<absent>")
            elif not TIMED.search(k) and p not in TIMED_PATHS:
                yield from differences(a[k], b[k], p)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield path + "[len]", len(a), len(b)
            return
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
        return
    if a != b:
        yield path, a, b


def run(binary, args, out):
    """`binary args --json out` ({bin} and {json} in args stand for them, e.g. under launch)."""
    command = [a.replace("{bin}", binary).replace("{json}", out) for a in args]
    if "{json}" not in args:
        command += ["--json", out]
    r = subprocess.run([binary, *command], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)} exited {r.returncode}:\n{r.stderr[-2000:]}")
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, cmd in enumerate(COMMANDS):
            a = run(args.before, cmd, os.path.join(tmp, f"a{i}.json"))
            b = run(args.after, cmd, os.path.join(tmp, f"b{i}.json"))
            diffs = list(differences(a, b))
            print(f"saturate {' '.join(cmd)}: {'same' if not diffs else f'{len(diffs)} difference(s)'}")
            for p, x, y in diffs[:20]:
                print(f"  {p}: {json.dumps(x)[:120]} -> {json.dumps(y)[:120]}")
            failed += bool(diffs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

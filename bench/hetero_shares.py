#!/usr/bin/env python3
"""Unequal ranks (issue 28's bench): two DDP ranks on this machine, rank 0 alone on core 0 and
rank 1 on core 1 beside a spinning process pinned there (about half a core: a rank half as fast),
rank 0 with a 48 MiB budget and rank 1 with 20 MiB (unequal memory too). `saturate train` of an mlp
on Fashion-MNIST, the same global batch and 200 optimizer steps, three ways, one after the other in
one run:

  smallest   --batch auto: equal shares, every rank at the smallest rank's micro-batch (before issue 28)
  equal      --batch auto --shares 1:1 of the global batch given by hand: each rank its own
             micro-batch, equal shares (memory alone does not help a rank that computes slower)
  once       --batch auto --shares auto --reshare-every 0: each rank's step timed at its own
             micro-batch before training, shares in proportion to the samples/s, gradients weighted
             by the shares; that split kept for the whole run
  speed      --batch auto --shares auto: the same start, then every 10 steps the ranks' busy times
             (step less wait) gathered and the shares re-split when that is predicted >= 1.05x faster

Twice: with the spinning process there from the start ("start"), and arriving only once training
starts, after the search and the timing ("late": a co-tenant that ramps up; "equal" left out). For
each: the shares, each rank's micro-batch x accumulation, samples/s of the whole job and each
rank's wait at the all-reduce, the wall time of the 200 steps, and the last loss (the same global
batches in every way: the losses agree to rounding).

    python3 bench/hetero_shares.py [--out bench/results/hetero_shares_cpu.md]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
STEPS = 200
GLOBAL = 2048
TRAIN = ("train --model mlp --layers 2 --width 512 --data fashion-mnist --device cpu --threads 1 --workers 0 "
         f"--no-augment --optimizer sgd --lr 0.05 --steps {STEPS} --global-batch {GLOBAL} --batch auto --no-monitor "
         "--log-every 1000 "
         "--memory-budget 48MiB,20MiB")
WAYS = {
    "smallest": "",
    "equal": f"--shares {GLOBAL // 2},{GLOBAL // 2}",
    "once": "--shares auto --reshare-every 0",
    "speed": "--shares auto",
}


NOTES = """
How to read it: "timed alone" is each rank's step at its micro-batch before training (what `--shares auto`
splits by; rank 1 about half of rank 0 beside the spinning process). "busy speed" is a rank's share over its
step time less its wait; "wait" is its time per step at the step's agreement point and in the gradients'
all-reduce beyond the last rank to arrive's: the faster rank waits for the straggler (smallest: rank 0 ~40 ms
a step), and by speed neither waits long. The job's samples/s is over the 200 training steps; the wall time
also holds the start, each rank's exact search and (speed) the timing. Equal shares with each rank's own
micro-batch are no faster than the smallest's (the slow rank still has half the batch). The losses agree to
rounding: the same global batches, weighted by the shares. "once" is the split made before training and
kept; "speed" re-splits it while training from the busy speeds (the table's busy speeds and waits are over
the whole run, the shares the last split's).
"""

def spin_on_core_1():
    return subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"])


def run(binary, way, out, late):
    """One way's run. late: the spinning process starts only when rank 0 says training starts (after
    the search and the timing), as a co-tenant that arrives later; else it spins from the start."""
    path = os.path.join(out, way + ".json")
    # rank r on core r; the launch itself and the hog are pinned too, so nothing else moves
    rank_cmd = (f"exec taskset -c $RANK {binary} {TRAIN} {WAYS[way]} --json {path}")
    cmd = [binary, "launch", "--nproc-per-node", "2", "--", "sh", "-c", rank_cmd]
    hog = None if late else spin_on_core_1()
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        tail = []
        for line in proc.stderr:  # the ranks' progress lines, prefixed by the launch
            tail = (tail + [line])[-40:]
            if late and hog is None and "saturate: training " in line:
                hog = spin_on_core_1()
        code = proc.wait(timeout=1800)
        seconds = time.perf_counter() - started
    finally:
        if hog:
            hog.kill()
            hog.wait()
    if code != 0:
        sys.exit(f"{way}: exit {code}\n{''.join(tail)}")
    with open(path) as f:
        j = json.load(f)
    return j, seconds


def resplits(j):
    """The re-splits during training: "-" without `--shares auto`, else their count and the steps."""
    b = j.get("share_balance")
    if not b:
        return "-"
    changes = b.get("changes", [])
    if b.get("every_steps", 0) == 0:
        return "none (kept)"
    if not changes:
        return f"0 of {b['looks']} looks"
    moves = ", ".join(f"{'/'.join(map(str, c['to']))} at {c['step']}" for c in changes)
    return f"{len(changes)} of {b['looks']} looks: {moves}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "hetero_shares_cpu.md"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "saturate"))
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs 2 cores (one per rank)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for late in (False, True):
            for way in WAYS:
                if late and way == "equal":
                    continue
                j, seconds = run(args.binary, way, tmp, late)
                ranks = j.get("ranks", [])
                split = " / ".join(f"{r['share']} = {r['micro_batch']} x {r['accumulation']}" for r in ranks)
                speeds = " / ".join(f"{r['samples_per_s']:.0f}" for r in ranks)
                waits = " / ".join(f"{r['wait_ms']:.1f}" for r in ranks)
                measured = " / ".join(f"{r['measured_samples_per_s']:.0f}" for r in ranks if "measured_samples_per_s" in r)
                rows.append(("late" if late else "start", way, split, measured or "-", resplits(j), speeds, waits,
                             j["samples_per_s"], seconds, j["losses"][-1]))
    base = {r[0]: r[7] for r in rows if r[1] == "smallest"}
    lines = [f"# Unequal ranks: shares by speed (bench/hetero_shares.py, {time.strftime('%Y-%m-%d')})", "",
             f"{platform.machine()}, {os.cpu_count()} cores. 2 DDP ranks (Gloo), rank 0 on core 0 with 48 MiB, rank 1 on "
             "core 1 beside a spinning process (half a core) with 20 MiB; mlp 2x512 on Fashion-MNIST, global batch "
             f"{GLOBAL}, {STEPS} optimizer steps, `--batch auto`. Per rank: rank 0 / rank 1. Spinner: there from the "
             "start, or arriving late (when rank 0 starts training, after the search and the timing).", "",
             "| spinner | way | share = micro x accumulation (at the end) | timed alone (samples/s) | re-splits while training | "
             "busy speed in training (samples/s) | wait for a slower rank (ms a step) | job samples/s | vs smallest | "
             "wall s (launch to exit) | last loss |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for when, way, split, measured, moved, speeds, waits, sps, seconds, loss in rows:
        lines.append(f"| {when} | {way} | {split} | {measured} | {moved} | {speeds} | {waits} | {sps:.0f} | "
                     f"{sps / base[when]:.2f}x | {seconds:.1f} | {loss:.4f} |")
    text = "\n".join(lines) + "\n" + NOTES
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One DDP job, four ranks on Gloo, a 10M-parameter MLP at one sample per rank (its gradients'
all-reduce takes 32-45 % of the step on this 2-CPU VM, over the 30 % threshold): three runs under
`saturate launch` and one under torchrun must all be called communication-bound, or borderline
with communication-bound first (its share within the band x1.25 around the threshold: on a VM
whose speed drifts, 0.32-0.37 came in 1 run of 4 here, 2026-12-06). A launcher that lost the
all-reduce's time would read compute-bound or balanced, and fail.

usage: verdict_launchers.py SATURATE_BINARY"""
import json, os, subprocess, sys, tempfile

RANKS = 4
JOB = ["train", "--model", "mlp", "--width", "2048", "--layers", "3", "--data", "fashion-mnist", "--device", "cpu",
       "--threads", "1", "--workers", "0", "--batch", "1", "--global-batch", str(RANKS), "--steps", "12",
       "--optimizer", "sgd", "--bucket-mb", "200", "-q"]


def run(cmd, out):
    p = subprocess.run(cmd + ["--json", out], capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    with open(out) as f:
        b = json.load(f)["bottleneck"]
    verdict = b["verdict"]
    if verdict == "borderline" and (b.get("between") or [None])[0] == "communication-bound":
        verdict = "communication-bound (borderline)"
    return verdict, b["evidence"]["shares"]


def main():
    exe = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="verdict_launchers_")
    runs = []
    for i in range(3):
        runs.append(("saturate launch",) + run([exe, "launch", "--nproc-per-node", str(RANKS), "--", exe] + JOB,
                                                os.path.join(tmp, f"launch{i}.json")))
    runs.append(("torchrun",) + run([sys.executable, "-m", "torch.distributed.run", "--no-python", "--standalone",
                                     "--nproc-per-node", str(RANKS), exe] + JOB, os.path.join(tmp, "torchrun.json")))
    for launcher, verdict, shares in runs:
        print(f"{launcher:16s} {verdict:34s} {json.dumps(shares)}")
    verdicts = [v for _, v, _ in runs]
    if any(not v.startswith("communication-bound") for v in verdicts):
        sys.exit(f"expected communication-bound (or borderline with it first) in every run, got {verdicts}")
    print("ok: communication-bound (or borderline with it first) in all four runs")


if __name__ == "__main__":
    main()
